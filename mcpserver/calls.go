package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
	"github.com/approvals/approvals/web/agentapi"
)

// call is the shape of every tool's work: the calling agent and the raw
// arguments in, a result or an error out. Errors become isError results.
type call func(ctx context.Context, agent string, raw json.RawMessage) (*mcp.CallToolResult, error)

// argumentsCall is the work of a read or drive tool, on decoded arguments.
type argumentsCall func(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error)

// handle wraps a call with what every tool needs: the caller, and a refusal
// the model can read for every error. A guarded call (a submission, a drive
// call) acts through a statement that checks a token taken from the cache
// (caller); any other call comes after the token's lookup (tokenCheck).
func (s *server) handle(c call, guarded bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		// The SDK runs handlers on its own goroutines without recovering, so
		// a panic here would end the process, not just the call.
		defer func() {
			if p := recover(); p != nil {
				s.log.ErrorContext(ctx, "mcp: call panicked", "tool", req.Params.Name, "panic", p, "stack", string(debug.Stack()))
				res, err = s.refuse(ctx, &queue.Error{Code: queue.CodeInternal, Detail: "internal error; it has been logged"}, "")
			}
		}()
		// The caller's trace: _meta's traceparent, the MCP way of carrying
		// it, wins over the HTTP request's.
		ctx, span := tracing.Start(tracing.ExtractMap(ctx, req.Params.Meta), "tools/call "+req.Params.Name,
			trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(attribute.String("mcp.method.name", "tools/call"),
				attribute.String("gen_ai.operation.name", "execute_tool"),
				attribute.String("gen_ai.tool.name", req.Params.Name))
			if req.Session != nil {
				span.SetAttributes(attribute.String("mcp.session.id", req.Session.ID()))
			}
			// The agent's name for its tool call: _meta's, else the HTTP
			// request's X-Tool-Call-Id (MCP has no id of its own for it).
			id, _ := req.Params.Meta[tracing.ToolCallIDMeta].(string)
			if id == "" && req.Extra != nil {
				id = req.Extra.Header.Get(tracing.ToolCallIDHeader)
			}
			if id != "" {
				ctx = tracing.WithToolCallID(ctx, id)
				span.SetAttributes(attribute.String("gen_ai.tool.call.id", tracing.ToolCallID(ctx)))
			}
		}
		agent, ok := agentOf(req)
		ca := callerOf(req)
		if !ok || ca == nil { // authenticate runs first, so this cannot happen
			return s.refuse(ctx, queue.Errorf(queue.CodeUnauthorized, "send an agent token as Authorization: Bearer TOKEN"), "")
		}
		guard := ""
		if guarded {
			guard = ca.guard()
		}
		if guard != "" {
			ctx = queue.WithTokenGuard(ctx, guard)
		}
		res, err = c(ctx, agent, req.Params.Arguments)
		ca.settle(guard, err)
		if err != nil {
			if span.IsRecording() {
				span.SetAttributes(attribute.String("error.type", errorType(err)))
				span.SetStatus(codes.Error, "")
			}
			return s.refuse(ctx, err, agent)
		}
		return res, nil
	}
}

// withArguments applies the argument checks of the REST API before a read
// or drive tool's work.
func (s *server) withArguments(c argumentsCall) call {
	return func(ctx context.Context, agent string, raw json.RawMessage) (*mcp.CallToolResult, error) {
		args, err := decodeArguments(raw, s.maxBody)
		if err != nil {
			return nil, err
		}
		return c(ctx, agent, args)
	}
}

// submit is the call of a guarded tool: it submits the arguments (without
// intent_key, otherwise as the client wrote them) as the payload of an
// action, as the calling agent.
func (s *server) submit(tool string) mcp.ToolHandler {
	return s.handle(func(ctx context.Context, agent string, raw json.RawMessage) (*mcp.CallToolResult, error) {
		sub, err := decodeSubmission(raw, s.maxBody)
		if err != nil {
			return nil, err
		}
		res, err := s.svc.Submit(ctx, queue.SubmitRequest{
			Tool: tool, Payload: sub.Payload, IntentKey: sub.IntentKey, Agent: agent, Channel: Channel,
			TokenHash: queue.TokenGuard(ctx), Plan: sub.Plan})
		if err != nil {
			return nil, err
		}
		if res.Action.Spec.Upstream != "" {
			return upstreamAnswer(res, agent)
		}
		return answer(res.Action, submitted(res, agent))
	}, true)
}

// pollArgs reads the id, wait and state arguments of a read that may
// long-poll (get_action, get_plan; parseState takes the state), then takes
// the agent's waiter slot when it waits: call release once done (a no-op
// when it does not wait).
func (s *server) pollArgs(agent string, args arguments, parseState func(string) error) (id string, wait time.Duration, release func(), err error) {
	release = func() {}
	if err = args.only("id", "wait", "state"); err != nil {
		return
	}
	if id, err = args.string("id", true); err != nil {
		return
	}
	w, err := args.string("wait", false)
	if err != nil {
		return
	}
	if wait, err = agentapi.ParseWait(w); err != nil {
		return
	}
	st, err := args.string("state", false)
	if err != nil {
		return
	}
	if err = parseState(st); err != nil {
		return
	}
	if wait > 0 {
		release, err = s.polls.AcquireWaiter("agent:" + agent)
	}
	return
}

func (s *server) getAction(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	var until queue.State
	id, wait, release, err := s.pollArgs(agent, args, func(st string) (err error) {
		until, err = agentapi.ParseState(st)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer release()
	a, err := s.polls.Wait(ctx, id, until, wait)
	if err != nil {
		return nil, err
	}
	return answer(a, fmt.Sprintf("%s is %s. %s", capitalize(describe(a)), a.State, nextStep(a, agent)))
}

func (s *server) findActions(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	if err := args.only(argIntentKey, "state", "tool", "limit", "cursor"); err != nil {
		return nil, err
	}
	key, err := args.string(argIntentKey, true)
	if err != nil {
		return nil, err
	}
	if err := queue.ValidIntentKey(key, argIntentKey); err != nil {
		return nil, err
	}
	filters := map[string]string{argIntentKey: key}
	for _, name := range []string{"state", "tool", "cursor"} {
		if filters[name], err = args.string(name, false); err != nil {
			return nil, err
		}
	}
	if raw, ok := args["limit"]; ok && string(raw) != "null" {
		var n int
		if json.Unmarshal(raw, &n) != nil {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "limit must be a whole number from 1 to 200")
		}
		filters["limit"] = strconv.Itoa(n)
	}
	lr, err := agentapi.ParseListRequest(func(name string) string { return filters[name] })
	if err != nil {
		return nil, err
	}
	list, next, err := s.svc.List(ctx, lr)
	if err != nil {
		return nil, err
	}
	out := agentapi.NewActionList(list, next)
	return answer(out, found(key, out, agent))
}

// found says what find_actions found.
func found(key string, l agentapi.ActionList, agent string) string {
	if len(l.Actions) == 0 {
		return fmt.Sprintf("No action matches intent key %q: approvals has recorded nothing for it, so an earlier call that timed out "+
			"never reached it. If the effect is still wanted, call the tool now.", key)
	}
	a := l.Actions[0]
	text := fmt.Sprintf("%d action(s) match intent key %q, newest first. The newest is %s; it is %s. %s",
		len(l.Actions), key, describe(a), a.State, nextStep(a, agent))
	if l.NextCursor != nil {
		text += " More are on the next page (cursor " + *l.NextCursor + ")."
	}
	return text
}

func (s *server) listTools(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	if err := args.only(); err != nil {
		return nil, err
	}
	views := agentapi.ToolViews(s.svc.Registry())
	return answer(map[string]any{"tools": views, "guidance": listGuidance}, fmt.Sprintf(
		"%d guarded tools. Each call of one submits an action; follow the guidance of its class. %s", len(views), listGuidance))
}

const listGuidance = "If a call times out, do not retry: read the action first (call find_actions with the intent key)."

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

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// errorType is a refusal's code for a span's error.type, "_OTHER" when it
// has none.
func errorType(err error) string {
	if code := queue.ErrorCode(err); code != "" {
		return string(code)
	}
	return "_OTHER"
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
