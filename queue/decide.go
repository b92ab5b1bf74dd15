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
	Note    string          // required to reject
	Payload json.RawMessage // approve only: an edited payload, or nil
}

// Approve approves a pending action, exactly once.
func (s *Service) Approve(ctx context.Context, r DecideRequest) (DriveResult, error) {
	a, err := s.store.ActionGetByID(ctx, r.ID)
	if err != nil {
		return DriveResult{}, err
	}
	if err := s.approvableUpstream(a); err != nil {
		return DriveResult{}, err
	}
	approved := a.Payload
	data := map[string]any{}
	if r.Note != "" {
		data["note"] = r.Note
	}
	if len(r.Payload) > 0 && !JSONEqual(r.Payload, a.Payload) {
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
	exp := now.Add(a.Spec.ExpiresAfter)
	raw, _ := json.Marshal(data)
	p := ActionTransitionParams{
		ID: r.ID, From: []State{StatePending}, To: StateApproved, Now: now, Unexpired: true,
		DecidedBy: &r.By, DecidedAt: &now, ApprovedPayload: approved, ExpiresAt: &exp,
		Event: Event{ActionID: r.ID, Kind: EventApproved, Actor: r.By, Channel: "dashboard", At: now, Data: raw},
	}
	if r.Note != "" {
		p.DecisionNote = &r.Note
	}
	return s.decide(ctx, p, "approve")
}

// Reject rejects a pending action for good; the reason is required.
func (s *Service) Reject(ctx context.Context, r DecideRequest) (DriveResult, error) {
	note := strings.TrimSpace(r.Note)
	if note == "" {
		return DriveResult{}, Errorf(CodeInvalidRequest, "note: a reason is required to reject")
	}
	now := s.Now()
	raw, _ := json.Marshal(map[string]string{"note": note})
	return s.decide(ctx, ActionTransitionParams{
		ID: r.ID, From: []State{StatePending}, To: StateRejected, Now: now, Unexpired: true,
		DecidedBy: &r.By, DecidedAt: &now, DecisionNote: &note, FinishedAt: &now,
		Event: Event{ActionID: r.ID, Kind: EventRejected, Actor: r.By, Channel: "dashboard", At: now, Data: raw},
	}, "reject")
}

func (s *Service) decide(ctx context.Context, p ActionTransitionParams, verb string) (DriveResult, error) {
	got, err := s.store.ActionTransition(ctx, p)
	if !errors.Is(err, ErrStateMismatch) {
		return DriveResult{Action: got}, err
	}
	if got.State == StatePending { // past expires_at, not yet swept
		if exp, err := s.expireOne(ctx, got, StatePending); err == nil {
			got = exp
		}
	}
	sameUser := got.DecidedBy != nil && *got.DecidedBy == *p.DecidedBy
	switch {
	case verb == "reject" && got.State == StateRejected && sameUser,
		verb == "approve" && sameUser && got.State != StateRejected && got.State != StateCancelled && got.ApprovedPayload != nil:
		return DriveResult{Action: got, Replayed: true}, nil
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
