package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/agentapi"
	"github.com/approvals/approvals/queue"
)

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
