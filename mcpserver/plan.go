package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/queue"
)

// The plan tools: propose_plan asks one decision for a piece of work,
// get_plan follows it (queue/plan.go).

var (
	proposePlanSchema = map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"title", "steps"},
		"properties": map[string]any{
			"title": map[string]any{"type": "string", "minLength": 1, "description": "What the piece of work is, for the person who approves it."},
			"steps": map[string]any{"type": "array", "minItems": 1, "maxItems": queue.MaxPlanSteps,
				"description": "The exact calls, in order: each is later submitted as is, with the plan's id.",
				"items": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"tool", "payload"},
					"properties": map[string]any{
						"tool":       map[string]any{"type": "string", "minLength": 1},
						"payload":    map[string]any{"type": "object", "description": "The tool's arguments, exactly as they will be sent."},
						argIntentKey: map[string]any{"type": "string", "minLength": 1, "maxLength": 255},
					}}},
			"ordered":       map[string]any{"type": "boolean", "description": "true: a step may be submitted only when every earlier step is done or recorded."},
			"expires_after": map[string]any{"type": "string", "description": "A Go duration, at most 168h (default 24h)."},
			"dry_run":       map[string]any{"type": "boolean", "description": "true: say what the plan would be; store nothing."},
		},
	}
	getPlanSchema = map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"id"},
		"properties": map[string]any{
			"id":    map[string]any{"type": "string", "description": "The plan's id."},
			"wait":  map[string]any{"type": "string", "description": "Optional long-poll, a Go duration (at most 60s): answer once the plan's state differs from state."},
			"state": map[string]any{"type": "string", "description": "With wait: the state to wait out (default: the plan's state when the call arrives)."},
		},
	}
)

// addPlanTools registers propose_plan and get_plan. Neither is guarded:
// the caller's token is looked up before each.
func (s *server) addPlanTools(ms *mcp.Server) {
	ms.AddTool(&mcp.Tool{Name: "propose_plan", Description: "Ask one human decision for a piece of work: list the exact calls (tool, payload, " +
		"intent_key if the tool has no template). Each step is judged by its tool's rules; a person approves the whole once. Follow it with " +
		"get_plan (with wait) until it is approved, then call each step's tool as listed with the plan's id; a call that differs from its step is refused.",
		InputSchema: proposePlanSchema, Annotations: actionAnnotations(false)}, s.handle(s.withArguments(s.proposePlan), false))
	ms.AddTool(&mcp.Tool{Name: "get_plan", Description: "Read a plan: its state (pending, approved, rejected, changes_requested, cancelled, expired, done) " +
		"and each step with its action and state. With wait it long-polls until the state changes.",
		InputSchema: getPlanSchema, Annotations: actionAnnotations(true)}, s.handle(s.withArguments(s.getPlan), false))
}

func (s *server) proposePlan(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	if err := args.only("title", "steps", "ordered", "expires_after", "dry_run"); err != nil {
		return nil, err
	}
	title, err := args.string("title", true)
	if err != nil {
		return nil, err
	}
	r := queue.PlanRequest{Title: title, Agent: agent, Channel: Channel}
	for _, name := range []string{"ordered", "dry_run"} {
		if raw, ok := args[name]; ok && string(raw) != "null" {
			var b bool
			if json.Unmarshal(raw, &b) != nil {
				return nil, queue.Errorf(queue.CodeInvalidRequest, "%s must be true or false", name)
			}
			if name == "ordered" {
				r.Ordered = b
			} else {
				r.DryRun = b
			}
		}
	}
	exp, err := args.string("expires_after", false)
	if err != nil {
		return nil, err
	}
	if exp != "" {
		if r.ExpiresAfter, err = time.ParseDuration(exp); err != nil || r.ExpiresAfter <= 0 {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "expires_after: %q is not a positive Go duration such as \"24h\"", exp)
		}
	}
	var steps []map[string]json.RawMessage
	if json.Unmarshal(args["steps"], &steps) != nil || len(steps) == 0 {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "steps is required: an array of {tool, payload, intent_key?}")
	}
	for i, st := range steps {
		var step queue.PlanStepRequest
		for name := range st {
			if name != "tool" && name != "payload" && name != argIntentKey {
				return nil, queue.Errorf(queue.CodeInvalidRequest, "steps[%d]: unknown field %q", i+1, name)
			}
		}
		if json.Unmarshal(st["tool"], &step.Tool) != nil || step.Tool == "" {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "steps[%d]: tool is required: a string", i+1)
		}
		if p := bytes.TrimSpace(st["payload"]); len(p) == 0 || p[0] != '{' {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "steps[%d]: payload must be a JSON object", i+1)
		}
		step.Payload = st["payload"]
		if step.IntentKey, err = queue.DecodeIntentKey(st[argIntentKey]); err != nil {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "steps[%d]: %s", i+1, strings.TrimPrefix(err.Error(), "invalid_request: "))
		}
		r.Steps = append(r.Steps, step)
	}
	res, err := s.svc.Plans().Propose(ctx, r)
	if err != nil {
		return nil, err
	}
	return answer(res.Plan, planText(res.Plan, res.DryRun))
}

func (s *server) getPlan(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error) {
	var until queue.PlanState
	id, wait, release, err := s.pollArgs(agent, args, func(st string) (err error) {
		until, err = queue.ParsePlanState(st)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer release()
	pl, err := s.svc.Plans().Wait(ctx, id, until, wait)
	if err != nil {
		return nil, err
	}
	return answer(pl, planText(pl, false))
}

// planText says what a plan is and what to do next.
func planText(pl *queue.Plan, dry bool) string {
	prefix := fmt.Sprintf("Plan %s (%d steps) is %s.", pl.ID, len(pl.Steps), pl.State)
	if dry {
		prefix = fmt.Sprintf("Dry run: nothing was stored. The plan of %d steps would be %s.", len(pl.Steps), pl.State)
	}
	switch pl.State {
	case queue.PlanPending:
		return prefix + " A person decides it: call get_plan with its id and wait until it is approved; do not call its steps' tools yet."
	case queue.PlanApproved:
		return prefix + " Call each step's tool with exactly its listed arguments and the plan's id; a step is let through once."
	case queue.PlanRejected, queue.PlanChangesRequested:
		return prefix + " Read decision_note: nothing of it may be performed; propose a revised plan if the note asks for one."
	}
	return prefix
}
