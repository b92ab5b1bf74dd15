package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
)

// answer is a successful result: v as structuredContent, then the paragraph
// saying what happened and what to do next, then the same JSON as text for
// clients that hand the model only text content.
func answer(v any, text string) (*mcp.CallToolResult, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}, &mcp.TextContent{Text: string(b)}},
		StructuredContent: b,
	}, nil
}

// Refusal is the structuredContent of an isError result: the code and detail
// of the REST API's problem, and the action that explains it, if any.
type Refusal struct {
	Code   queue.Code    `json:"code"`
	Detail string        `json:"detail"`
	Action *queue.Action `json:"action,omitempty"`
}

// refuse turns an error of the service or of argument decoding into an
// isError result the model can read: never a protocol error, which a client
// would likely retry. Only a call whose client went away (its context
// cancelled or past its deadline) gets a protocol error; nobody reads it.
func (s *server) refuse(ctx context.Context, err error, agent string) (*mcp.CallToolResult, error) {
	var qe *queue.Error
	// Gone only if the call's own context ended; a timeout inside the
	// store with the client still waiting stays a readable result.
	if !errors.As(err, &qe) && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil, err
	}
	qe = queue.ErrorOf(ctx, err, s.store, s.log, "face", "mcp", "agent", agent)
	r := Refusal{Code: qe.Code, Detail: qe.Detail, Action: qe.Action}
	text := strings.TrimSpace(fmt.Sprintf("Refused (%s): %s. %s", qe.Code, strings.TrimSuffix(qe.Detail, "."), refusalAdvice(qe, agent)))
	res, err := answer(r, text)
	if err != nil {
		return nil, err
	}
	res.IsError = true
	return res, nil
}

// refusalAdvice says what to do after a refusal.
func refusalAdvice(e *queue.Error, agent string) string {
	a := e.Action
	switch e.Code {
	case queue.CodeInvalidRequest, queue.CodeInvalidPayload:
		return "Nothing was done: fix the arguments and call again."
	case queue.CodePayloadTooLarge:
		return "Nothing was done: send smaller arguments."
	case queue.CodeIntentKeyRequired:
		return "Nothing was done: add intent_key to the arguments; every retry for the same objective must send the same key."
	case queue.CodeIntentKeyMismatch:
		return "Nothing was done: leave intent_key out, approvals derives it from the arguments."
	case queue.CodeIntentKeyReused:
		return problem.Guidance(e.Code, problem.FaceMCP)
	case queue.CodeInProgress:
		g := problem.Guidance(e.Code, problem.FaceMCP)
		switch {
		case a == nil:
			return g
		case a.Gated(): // a repeated execute_action
			return nextStep(a, agent)
		case a.Agent() == agent:
			return g + fmt.Sprintf(" If the claim comes from your own earlier call for this intent "+
				"that timed out or failed before you saw its result, call find_actions with intent_key %q and follow what it says; "+
				"otherwise read it later with get_action (id %s, wait).", a.IntentKey, a.ID)
		}
		return g + fmt.Sprintf(" %s holds the claim: read it later with get_action (id %s, wait).", a.RequestedBy, a.ID)
	case queue.CodeInvalidTransition, queue.CodeAlreadyDecided:
		if a != nil {
			return nextStep(a, agent)
		}
	case queue.CodeOutcomeConflict:
		return problem.Guidance(e.Code, problem.FaceMCP)
	case queue.CodeIntentUnderReview:
		g := problem.Guidance(e.Code, problem.FaceMCP)
		if a == nil {
			return g
		}
		return g + fmt.Sprintf(" Do not perform %s another way: call find_actions with intent_key %q, and tell the user an operator is checking it.", a.Tool, a.IntentKey)
	case queue.CodeForbidden:
		return "Only the agent that submitted an action may drive it; you may read it with get_action."
	case queue.CodeNotFound:
		return "Check the id; find_actions with the intent key lists an intent's actions."
	case queue.CodeUnauthorized:
		return "The call carries no valid agent token."
	case queue.CodeUnavailable, queue.CodeInternal:
		return "approvals could not complete the call. Before calling a guarded tool again, call find_actions with its intent key."
	}
	return ""
}

// describe names an action in a sentence.
func describe(a *queue.Action) string {
	if a.IntentKey == "" {
		return fmt.Sprintf("action %s (%s, %s)", a.ID, a.Tool, a.Class)
	}
	return fmt.Sprintf("action %s (%s, %s, intent %q, attempt %d)", a.ID, a.Tool, a.Class, a.IntentKey, a.Attempt)
}

// nextStep says what state a is in and what the agent should do now.
func nextStep(a *queue.Action, agent string) string {
	mine := a.Agent() == agent
	var b strings.Builder
	switch a.State {
	case queue.StatePending:
		fmt.Fprintf(&b, "It waits for a person to approve it; nothing has been sent. Do not call %s again for this intent: "+
			"call get_action with id %s and wait \"60s\", again while it stays pending (it expires at %s).", a.Tool, a.ID, stamp(a.ExpiresAt))
	case queue.StateApproved:
		switch {
		case a.ServerExecuted():
			fmt.Fprintf(&b, "It was approved by %s and approvals delivers it itself: never send it yourself. "+
				"Follow it with get_action (wait) until it is done or failed.", who(a.DecidedBy))
		case mine:
			fmt.Fprintf(&b, "It was approved by %s. Call execute_action with id %s once, send its approved_payload exactly once, "+
				"then call complete_action with the result, or fail_action if it definitely was not sent. The approval expires at %s.",
				who(a.DecidedBy), a.ID, stamp(a.ExpiresAt))
		default:
			fmt.Fprintf(&b, "It was approved by %s; only %s, who requested it, may execute it.", who(a.DecidedBy), a.RequestedBy)
		}
	case queue.StateRejected:
		fmt.Fprintf(&b, "It was rejected by %s", who(a.DecidedBy))
		if a.DecisionNote != nil && *a.DecisionNote != "" {
			fmt.Fprintf(&b, " with the reason %q", *a.DecisionNote)
		}
		b.WriteString(". Do not try again for this intent: tell the user why.")
	case queue.StateChangesRequested:
		fmt.Fprintf(&b, "%s asked for changes", who(a.DecidedBy))
		if a.DecisionNote != nil && *a.DecisionNote != "" {
			fmt.Fprintf(&b, ": %q", *a.DecisionNote)
		}
		fmt.Fprintf(&b, ". Nothing was sent. Revise the payload as the note asks and call %s again with the same intent key %q; "+
			"that starts attempt %d, which needs a fresh approval.", a.Tool, a.IntentKey, a.Attempt+1)
	case queue.StateExpired:
		fmt.Fprintf(&b, "It expired without being executed; nothing was sent. The intent is free: call %s again only if it is "+
			"still wanted (a new attempt, which needs a fresh approval).", a.Tool)
	case queue.StateCancelled:
		fmt.Fprintf(&b, "It was cancelled by %s before execution; nothing was sent. The intent is free: call %s again only if it is still wanted.",
			who(a.DecidedBy), a.Tool)
	case queue.StateInProgress:
		b.WriteString(inProgress(a, mine))
	case queue.StateDone:
		if a.Class == classify.AtLeastOnce { // an upstream call
			fmt.Fprintf(&b, "approvals called the upstream tool (finished at %s); its result is in the action's result field. "+
				"Repeating it is harmless: call %s again whenever you need a fresh answer.", stamp(a.FinishedAt), a.Tool)
			break
		}
		fmt.Fprintf(&b, "The effect happened (finished at %s); its result is in the action's result field. Do not perform it again.", stamp(a.FinishedAt))
	case queue.StateFailed:
		if a.Class == classify.AtLeastOnce { // an upstream call
			fmt.Fprintf(&b, "approvals called the upstream tool and it failed (%s). Repeating it is harmless: call %s again if it is still wanted.",
				deref(a.Error), a.Tool)
			break
		}
		fmt.Fprintf(&b, "It definitely did not happen (%s). The intent is free: call %s again if it is still wanted; that starts attempt %d.",
			deref(a.Error), a.Tool, a.Attempt+1)
	case queue.StateRecorded:
		if a.Spec.Upstream != "" { // called before such calls ended done or failed
			b.WriteString("approvals called the upstream tool at once; its answer is in the action's result and error fields. Repeating it is harmless.")
			break
		}
		b.WriteString("It is recorded: perform the effect yourself. Repeating it is harmless.")
	}
	if t := a.Ticket; t != nil && t.State == queue.TicketOpen {
		fmt.Fprintf(&b, " An operator ticket (%s) is open for it: an operator will check the external system", t.Kind)
		if t.Kind == queue.TicketStale && mine {
			b.WriteString(", unless you report first with complete_action or fail_action")
		}
		b.WriteString(".")
	}
	return b.String()
}

func inProgress(a *queue.Action, mine bool) string {
	switch {
	case a.ServerExecuted():
		return fmt.Sprintf("approvals is delivering it (since %s): never send it yourself. Follow it with get_action (wait) until it is done or failed.", stamp(a.ClaimedAt))
	case !mine:
		return fmt.Sprintf("It is in progress for %s since %s: do not act on it. Read it later with get_action (wait).", a.RequestedBy, stamp(a.ClaimedAt))
	case a.Gated():
		return fmt.Sprintf("You took it for execution at %s. If you sent its approved_payload, call complete_action with id %s and the result; "+
			"if you definitely did not send it, call fail_action. Never send it a second time: a new execute_action is never permission to send.",
			stamp(a.ClaimedAt), a.ID)
	}
	return fmt.Sprintf("It is claimed by you (%s) since %s. If you already performed the effect, call complete_action with id %s and the result. "+
		"If your earlier call for this intent timed out or failed before you saw its result, you have not performed it: perform it exactly "+
		"once now, then call complete_action with the result, or fail_action if it definitely did not happen.", a.RequestedBy, stamp(a.ClaimedAt), a.ID)
}

// submitted says what a submission did.
func submitted(res queue.SubmitResult, agent string) string {
	a := res.Action
	var b strings.Builder
	switch {
	case res.Replayed:
		fmt.Fprintf(&b, "Nothing new was done: intent %q is already held by %s, created at %s, returned as it is stored. %s",
			a.IntentKey, describe(a), stamp(&a.CreatedAt), nextStep(a, agent))
	case a.State == queue.StateApproved:
		fmt.Fprintf(&b, "Approved at once by %s: it may be executed now, without waiting for anyone. %s", decider(a), nextStep(a, agent))
	case a.State == queue.StateRejected:
		fmt.Fprintf(&b, "Rejected at once by %s", decider(a))
		if a.DecisionNote != nil && *a.DecisionNote != "" {
			fmt.Fprintf(&b, " with the reason %q", *a.DecisionNote)
		}
		fmt.Fprintf(&b, ": %s is rejected and nothing was done. Do not try again for this intent: tell the user why.", describe(a))
	case a.State == queue.StatePending:
		fmt.Fprintf(&b, "Submitted for approval as %s. %s", describe(a), nextStep(a, agent))
	case a.Class == classify.ExactlyOnce:
		fmt.Fprintf(&b, "You hold the claim on intent %q: %s is in_progress. Perform the effect exactly once now, then call complete_action "+
			"with id %s and the result, or fail_action if it definitely did not happen. If you lose track of this call, call find_actions "+
			"with intent_key %q before anything else; never call %s again blindly.", a.IntentKey, describe(a), a.ID, a.IntentKey, a.Tool)
	default:
		fmt.Fprintf(&b, "Recorded as %s: perform the effect yourself. Repeating it is harmless.", describe(a))
	}
	for _, w := range a.Warnings {
		if w == "intent_key_looks_random" {
			b.WriteString(" Warning: the intent key looks random (a UUID, a timestamp or a hash); derive it from the business fact so that a retry maps to the same key.")
		}
	}
	return b.String()
}

// decider names what decided an action at its submission: a policy rule,
// with its expression, or a grant, with the person who granted it.
func decider(a *queue.Action) string {
	if id := queue.GrantIDOf(a.DecidedBy); id != "" {
		by := "a person"
		if len(a.Approvals) > 0 {
			by = a.Approvals[0].By
		}
		return fmt.Sprintf("grant %s (given by %s for actions like this one)", id, by)
	}
	if r := a.DecidedByRule(); r != "" {
		if a.State == queue.StateApproved && a.DecisionNote != nil {
			return fmt.Sprintf("policy rule %s (%s)", r, strings.TrimPrefix(*a.DecisionNote, r+": "))
		}
		return "policy rule " + r
	}
	return who(a.DecidedBy)
}

func who(s *string) string {
	if s == nil || *s == "" {
		return "someone"
	}
	return *s
}

func stamp(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}
