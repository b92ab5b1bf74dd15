package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// DecideRequest is a staff decision.
type DecideRequest struct {
	ID      string
	By      string          // user:EMAIL
	Note    string          // required to reject and to request changes
	Payload json.RawMessage // approve only: an edited payload, or nil
	// Channel is where the decision was made: "dashboard" (the default),
	// "slack", …; it shows in the timeline.
	Channel string
}

func (r DecideRequest) channel() string {
	if r.Channel == "" {
		return "dashboard"
	}
	return r.Channel
}

// Approve approves a pending action, exactly once.
func (s *Service) Approve(ctx context.Context, r DecideRequest) (DriveResult, error) {
	a, err := s.store.ActionGetByID(ctx, r.ID)
	if err != nil {
		return DriveResult{}, err
	}
	return s.approve(ctx, a, r)
}

// approve is Approve of an action its caller has read (Bulk reads its
// selection in one query). Of that copy it uses only what is fixed at
// submission (payload, intent key, the tool's snapshot) and, to skip the
// upstream check, a state that is no longer pending; whether the action may
// still be decided is judged by the store under the action's lock.
func (s *Service) approve(ctx context.Context, a *Action, r DecideRequest) (DriveResult, error) {
	if err := s.approvableUpstream(a); err != nil {
		return DriveResult{}, err
	}
	approved := a.Payload
	data := map[string]any{}
	if r.Note != "" {
		data["note"] = r.Note
	}
	if len(r.Payload) > 0 && !JSONEqual(r.Payload, a.Payload) {
		if n := a.Spec.Approval.RequiredApprovals(); n > 1 {
			return DriveResult{}, Errorf(CodeInvalidPayload, "tool %s needs %d approvals of the same content, so the payload cannot be edited; request changes instead", a.Tool, n)
		}
		edited, err := DecodeObject(r.Payload)
		if err != nil {
			return DriveResult{}, Errorf(CodeInvalidPayload, "the edited payload must be a JSON object")
		}
		spec := a.Spec
		if err := spec.Validate(edited); err != nil {
			return DriveResult{}, payloadError(err)
		}
		if spec.Intent != "" {
			key, err := spec.DeriveKey(edited)
			if err != nil {
				return DriveResult{}, payloadError(err)
			}
			if key != a.IntentKey {
				return DriveResult{}, Errorf(CodeInvalidPayload, "the edited payload derives intent key %q, not %q: an edit may not change the intent", key, a.IntentKey)
			}
		}
		original, _ := DecodeObject(a.Payload)
		changed := changedFields(original, edited)
		sort.Strings(changed)
		data["changed_fields"] = changed
		data["approved_payload"] = json.RawMessage(r.Payload)
		approved = r.Payload
	}
	now := s.Now()
	raw, _ := json.Marshal(data)
	return s.decide(ctx, ActionDecideParams{
		ID: r.ID, To: StateApproved, By: r.By, Note: r.Note, Channel: r.channel(), Now: now,
		ApprovedPayload: approved, ExpiresAt: now.Add(a.Spec.ExpiresAfter),
		Event: Event{ActionID: r.ID, Kind: EventApproved, Actor: r.By, Channel: r.channel(), At: now, Data: raw},
	})
}

// Reject rejects a pending action for good; the reason is required.
func (s *Service) Reject(ctx context.Context, r DecideRequest) (DriveResult, error) {
	return s.decideWithNote(ctx, r, StateRejected, EventRejected, "a reason is required to reject")
}

// RequestChanges sends a pending action back to its agent: the state
// changes_requested is final for this attempt and releases the intent, so
// the agent revises the payload as the note asks and submits again with
// the same key. The note is required; the roles and rules are reject's.
func (s *Service) RequestChanges(ctx context.Context, r DecideRequest) (DriveResult, error) {
	return s.decideWithNote(ctx, r, StateChangesRequested, EventChangesRequested, "say what should change")
}

func (s *Service) decideWithNote(ctx context.Context, r DecideRequest, to State, kind, missing string) (DriveResult, error) {
	note := strings.TrimSpace(r.Note)
	if note == "" {
		return DriveResult{}, Errorf(CodeInvalidRequest, "note: %s", missing)
	}
	r.Note = note
	now := s.Now()
	raw, _ := json.Marshal(map[string]string{"note": note})
	return s.decide(ctx, ActionDecideParams{
		ID: r.ID, To: to, By: r.By, Note: note, Channel: r.channel(), Now: now,
		Event: Event{ActionID: r.ID, Kind: kind, Actor: r.By, Channel: r.channel(), At: now, Data: raw},
	})
}

// decide runs one decision through the store's locked path and turns a
// refusal into the contract's answer: a replay for the same user's same
// decision, else already_decided naming who decided and when.
func (s *Service) decide(ctx context.Context, p ActionDecideParams) (DriveResult, error) {
	res, err := s.store.ActionDecide(ctx, p)
	got := res.Action
	if err == nil {
		return DriveResult{Action: got, Replayed: res.Outcome == DecideReplayed}, nil
	}
	if !errors.Is(err, ErrStateMismatch) {
		return DriveResult{Action: got}, err
	}
	if got.State == StatePending { // past expires_at, not yet swept
		// Expire it here. If another process got there first (a sweep, a
		// concurrent refusal), the failed transition returns the row as it
		// now is: answer with that, never with the pending copy read above.
		exp, err := s.expireOne(ctx, got, StatePending)
		if err == nil || (errors.Is(err, ErrStateMismatch) && exp != nil) {
			got = exp
		}
	}
	sameUser := got.DecidedBy != nil && *got.DecidedBy == p.By
	switch p.To {
	case StateRejected, StateChangesRequested:
		if got.State == p.To && sameUser {
			return DriveResult{Action: got, Replayed: true}, nil
		}
	case StateApproved:
		if (sameUser || got.Approved(p.By)) && got.ApprovedPayload != nil &&
			got.State != StateRejected && got.State != StateCancelled && got.State != StateChangesRequested {
			return DriveResult{Action: got, Replayed: true}, nil
		}
	}
	by := "system"
	if got.DecidedBy != nil {
		by = *got.DecidedBy
	}
	return DriveResult{}, &Error{Code: CodeAlreadyDecided, Action: got,
		Detail: fmt.Sprintf("action %s is %s: decided by %s at %s", got.ID, got.State, by, fmtTime(got.DecidedAt))}
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}
