package claudecode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// maxPoll is the longest long-poll the API allows (?wait).
const maxPoll = 60 * time.Second

// pre answers PreToolUse: allow only what approvals lets through, and only
// once the call is claimed for this tool use.
func (h *hook) pre(ctx context.Context) Output {
	t, err := h.lookup(ctx)
	if err != nil {
		return deny("approvals: " + err.Error() + ". The call is denied until approvals answers.")
	}
	body := map[string]any{"tool": h.tool(), "payload": h.payload()}
	// With a template the server derives the key from the payload, and a
	// supplied key that differs would be refused.
	ownKey := t.Intent == ""
	if ownKey {
		key, err := h.defaultKey()
		if err != nil {
			return deny("approvals: " + err.Error())
		}
		body["intent_key"] = key
	}
	var a action
	status, err := h.request(ctx, http.MethodPost, "/api/v1/actions", body, shortTimeout, &a)
	if err != nil {
		var p *problem
		if errors.As(err, &p) && p.Code == "in_progress" && p.Action != nil {
			return deny(fmt.Sprintf("approvals: %s is being performed right now by an earlier call: do not run it again.", h.describe(p.Action)))
		}
		return deny("approvals refused this call: " + err.Error())
	}
	return h.decide(ctx, &a, status == http.StatusCreated, ownKey)
}

// decide turns the state of the call's action into the permission decision.
func (h *hook) decide(ctx context.Context, a *action, created, ownKey bool) Output {
	switch a.State {
	case "recorded":
		return allow(fmt.Sprintf("approvals recorded %s: %s is at-least-once, repeating it is harmless.", a.ID, a.Tool))
	case "in_progress":
		if created {
			return allow(fmt.Sprintf("approvals: this call holds the claim of exactly-once %s; its outcome is recorded when it returns.", h.describe(a)))
		}
		return deny(fmt.Sprintf("approvals: %s is already being performed: do not run it again.", h.describe(a)))
	case "pending":
		return h.await(ctx, a, ownKey)
	case "approved":
		return h.execute(ctx, a)
	case "done":
		return deny(fmt.Sprintf("approvals: %s was already done: do not run it again.", h.describe(a)))
	case "rejected":
		return deny(fmt.Sprintf("approvals: %s rejected this call: %s (%s). Do not try it again.", a.DecidedBy, a.DecisionNote, h.describe(a)))
	case "changes_requested":
		return deny(fmt.Sprintf("approvals: %s asked for changes: %s. Revise the call as the note asks, then make it again (%s).", a.DecidedBy, a.DecisionNote, h.describe(a)))
	case "expired":
		return deny(fmt.Sprintf("approvals: %s expired before it was executed.", h.describe(a)))
	case "cancelled":
		return deny(fmt.Sprintf("approvals: %s was withdrawn.", h.describe(a)))
	}
	return deny(fmt.Sprintf("approvals: %s is %s: the call is not allowed.", h.describe(a), a.State))
}

// await long-polls the pending action until a person decides it or the
// hook's wait runs out.
func (h *hook) await(ctx context.Context, a *action, ownKey bool) Output {
	deadline := h.now().Add(h.cfg.Wait)
	for a.State == "pending" {
		remaining := deadline.Sub(h.now()).Truncate(time.Millisecond)
		if remaining <= 0 {
			return h.stillPending(ctx, a, ownKey)
		}
		poll := min(remaining, maxPoll)
		var next action
		_, err := h.request(ctx, http.MethodGet, "/api/v1/actions/"+a.ID+"?state=pending&wait="+poll.String(), nil, poll+shortTimeout, &next)
		if err != nil {
			var p *problem
			if errors.As(err, &p) && p.Status < 500 && p.Status != http.StatusTooManyRequests {
				return deny("approvals: " + err.Error())
			}
			// The server went away for a moment: try again until the
			// deadline, and deny if it does not come back.
			select {
			case <-ctx.Done():
				return deny("approvals: stopped waiting for the decision of " + h.describe(a) + ": " + ctx.Err().Error())
			case <-time.After(min(time.Second, remaining)):
			}
			continue
		}
		a = &next
	}
	return h.decide(ctx, a, false, ownKey)
}

// stillPending denies a call nobody decided in time. A key of the hook's own
// names this tool use only, so no later call can use its decision: the
// action is withdrawn rather than left for a person to approve in vain.
func (h *hook) stillPending(ctx context.Context, a *action, ownKey bool) Output {
	waited := fmt.Sprintf("approvals: nobody decided %s within %s", h.describe(a), h.cfg.Wait)
	if !ownKey {
		return deny(waited + ". It stays pending; make the same call again once a person has decided it.")
	}
	var c action
	_, err := h.request(ctx, http.MethodPost, "/api/v1/actions/"+a.ID+"/cancel", nil, shortTimeout, &c)
	var p *problem
	if errors.As(err, &p) && p.Code == "invalid_transition" && p.Action != nil && p.Action.State != "pending" {
		return h.decide(ctx, p.Action, false, ownKey) // decided just now
	}
	if err != nil {
		return deny(waited + ". It could not be withdrawn (" + err.Error() + ").")
	}
	return deny(waited + "; it was withdrawn. Ask the user to approve it sooner, then make the call again.")
}

// execute claims an approved action for this call: only the one call whose
// execute succeeds may run the tool.
func (h *hook) execute(ctx context.Context, a *action) Output {
	var claimed action
	if _, err := h.request(ctx, http.MethodPost, "/api/v1/actions/"+a.ID+"/execute", nil, shortTimeout, &claimed); err != nil {
		return deny("approvals: the approved " + h.describe(a) + " could not be claimed for this call: " + err.Error() + ". Do not run it.")
	}
	note := ""
	if claimed.DecisionNote != "" {
		note = ": " + claimed.DecisionNote
	}
	return allow(fmt.Sprintf("approvals: approved by %s%s. This call holds %s; its outcome is recorded when it returns.", claimed.DecidedBy, note, h.describe(&claimed)))
}
