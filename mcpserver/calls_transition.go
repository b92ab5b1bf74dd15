package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// drive runs a drive tool: it takes id and the named other arguments,
// moves the action, and words the answer. move reads its other arguments
// itself.
func drive(args arguments, others []string, move func(id string) (queue.DriveResult, error), say func(queue.DriveResult) string) (*mcp.CallToolResult, error) {
	if err := args.only(append([]string{"id"}, others...)...); err != nil {
		return nil, err
	}
	id, err := args.string("id", true)
	if err != nil {
		return nil, err
	}
	res, err := move(id)
	if err != nil {
		return nil, err
	}
	return answer(res.Action, say(res))
}

func (s *server) executeAction(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	return drive(args, nil, func(id string) (queue.DriveResult, error) {
		a, err := s.svc.Execute(ctx, id, agent, Channel)
		return queue.DriveResult{Action: a}, err
	}, func(r queue.DriveResult) string {
		return fmt.Sprintf("You now hold the execution of %s: send its approved_payload exactly once now, then call complete_action "+
			"with id %s and the result, or fail_action if it definitely was not sent. Do not call execute_action again: a later call is "+
			"never permission to send.", describe(r.Action), r.Action.ID)
	})
}

func (s *server) completeAction(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	return drive(args, []string{"result"}, func(id string) (queue.DriveResult, error) {
		result, ok := args["result"]
		if !ok {
			return queue.DriveResult{}, queue.Errorf(queue.CodeInvalidRequest, "result is required")
		}
		return s.svc.Complete(ctx, id, agent, result, Channel)
	}, func(r queue.DriveResult) string {
		if r.Replayed {
			return fmt.Sprintf("Already recorded: %s is done with this same result; nothing changed.", describe(r.Action))
		}
		return fmt.Sprintf("Recorded: %s is done with your result. Nothing more to do for it.", describe(r.Action))
	})
}

func (s *server) failAction(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	return drive(args, []string{"error"}, func(id string) (queue.DriveResult, error) {
		text, err := args.string("error", true)
		if err != nil {
			return queue.DriveResult{}, queue.Errorf(queue.CodeInvalidRequest, "error is required: a string saying why the effect definitely did not happen")
		}
		return s.svc.Fail(ctx, id, agent, text, Channel)
	}, func(r queue.DriveResult) string {
		a := r.Action
		if r.Replayed {
			return fmt.Sprintf("Already recorded: %s failed; nothing changed.", describe(a))
		}
		again := ""
		if a.Class == classify.AtMostOnce {
			again = ", which needs a fresh approval"
		}
		return fmt.Sprintf("Recorded: %s failed, and intent %q is released: a new call of %s starts attempt %d%s.",
			describe(a), a.IntentKey, a.Tool, a.Attempt+1, again)
	})
}

func (s *server) cancelAction(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	return drive(args, nil, func(id string) (queue.DriveResult, error) {
		return s.svc.Cancel(ctx, id, agent, Channel)
	}, func(r queue.DriveResult) string {
		if r.Replayed {
			return fmt.Sprintf("Already cancelled: %s; nothing changed.", describe(r.Action))
		}
		return fmt.Sprintf("Cancelled %s: nothing will be sent and the intent is released.", describe(r.Action))
	})
}

func (s *server) verifyAction(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	if err := args.only("id"); err != nil {
		return nil, err
	}
	id, err := args.string("id", true)
	if err != nil {
		return nil, err
	}
	check, err := s.svc.Tickets().Verify(ctx, queue.VerifyRequest{ActionID: id, Agent: "agent:" + agent, By: "agent:" + agent})
	if err != nil {
		return nil, err
	}
	var say string
	switch {
	case check.Action.State == queue.StateDone:
		say = fmt.Sprintf("The system of record shows the effect happened: %s is done; its result is the provider's record. Do not send it again.", describe(check.Action))
	case check.Action.State == queue.StateFailed:
		say = fmt.Sprintf("The system of record shows the effect did not happen: %s failed, and a new call starts a new attempt.", describe(check.Action))
	default:
		say = fmt.Sprintf("Verdict %s: %s. %s stays in_progress; do not send it again.", check.Verdict, check.Reason, capitalize(describe(check.Action)))
	}
	return answer(check, say)
}
