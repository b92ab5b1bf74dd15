package queue

import (
	"context"
	"errors"
	"strings"
)

// MaxBulk is the most actions one bulk decision may name.
const MaxBulk = 200

// BulkOutcome is what a bulk decision did to one action; the dashboard
// shows these words as they are.
type BulkOutcome string

const (
	// BulkDecided: this request's decision took effect (under a quorum it
	// counts as one approval).
	BulkDecided BulkOutcome = "decided"
	// BulkAlreadyDecided: a person decided it before; DecidedBy says who.
	BulkAlreadyDecided BulkOutcome = "already decided"
	// BulkNotAllowed: the tool asks for each action to be reviewed on its
	// own page (approval.bulk false), or this user may not decide it.
	BulkNotAllowed BulkOutcome = "not allowed"
	// BulkNotPending: it is not waiting for a person: expired, cancelled,
	// or no such action at all.
	BulkNotPending BulkOutcome = "not pending"
)

// BulkRequest decides many actions alike: Decision is "approve" or
// "reject" (which needs Note).
type BulkRequest struct {
	IDs      []string
	Decision string
	By       string // user:EMAIL
	Note     string
}

// BulkResult is one selected action's outcome, in the order selected.
type BulkResult struct {
	ID      string
	Action  *Action // as it is now; nil for an unknown id
	Outcome BulkOutcome
	// DecidedBy is the email of whoever decided it, for BulkDecided and
	// BulkAlreadyDecided.
	DecidedBy string
	// Reason explains BulkNotAllowed and BulkNotPending.
	Reason string
}

// ErrBulkNoteRequired refuses a bulk rejection without a reason.
var ErrBulkNoteRequired = Errorf(CodeInvalidRequest, "note: a note is required to reject; say why, and it is kept with each action")

// Bulk decides each selected action through Decide, the same
// exactly-once path as a single decision (one conditional statement each),
// and reports every action's outcome: a selection is never partly decided
// in silence. Duplicate ids count once. It stops at a storage error, which
// it returns with the outcomes so far.
//
// It reads the selection once, in one query, and decides from that copy;
// the only other read of an action is the store's, under the action's lock
// inside the decision's transaction, which is what the decision rests on
// (the row may have changed since the first read) and whose row the
// outcome reports.
func (s *Service) Bulk(ctx context.Context, r BulkRequest) ([]BulkResult, error) {
	if r.Decision != "approve" && r.Decision != "reject" {
		return nil, Errorf(CodeInvalidRequest, "decision must be approve or reject")
	}
	ids := make([]string, 0, len(r.IDs))
	seen := make(map[string]bool, len(r.IDs))
	for _, id := range r.IDs {
		if id = strings.TrimSpace(id); id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	switch {
	case len(ids) == 0:
		return nil, Errorf(CodeInvalidRequest, "ids: select at least one action")
	case len(ids) > MaxBulk:
		return nil, Errorf(CodeInvalidRequest, "ids: at most %d actions may be decided at once, %d were selected", MaxBulk, len(ids))
	case r.Decision == "reject" && strings.TrimSpace(r.Note) == "":
		return nil, ErrBulkNoteRequired
	}
	known, err := ActionsByID(ctx, s.store, ids)
	if err != nil {
		return nil, err
	}
	// One decider for the whole selection.
	decider, err := s.Staff().Decider(ctx, r.By)
	if err != nil {
		return nil, err
	}
	out := make([]BulkResult, 0, len(ids))
	for _, id := range ids {
		a := known[id]
		res := BulkResult{ID: id, Action: a}
		switch {
		case a == nil:
			res.Outcome, res.Reason = BulkNotPending, "no such action"
		case r.Decision == "approve" && !a.Spec.Approval.BulkAllowed():
			res.Outcome, res.Reason = BulkNotAllowed, "its tool asks for each action to be reviewed on its own page"
		default:
			if err := s.bulkDecideOne(ctx, r, &decider, &res); err != nil {
				return out, err
			}
		}
		out = append(out, res)
	}
	return out, nil
}

func (s *Service) bulkDecideOne(ctx context.Context, r BulkRequest, decider *Decider, res *BulkResult) error {
	d := DecideRequest{ID: res.ID, To: StateApproved, By: r.By, Note: strings.TrimSpace(r.Note), decider: decider}
	var got DriveResult
	var err error
	if r.Decision == "approve" {
		got, err = s.approve(ctx, res.Action, d)
	} else {
		d.To = StateRejected
		got, err = s.Decide(ctx, d)
	}
	var qe *Error
	switch {
	case err == nil && !got.Replayed:
		res.Action, res.Outcome, res.DecidedBy = got.Action, BulkDecided, strings.TrimPrefix(r.By, "user:")
	case err == nil: // this user's own earlier decision
		res.Action, res.Outcome, res.DecidedBy = got.Action, BulkAlreadyDecided, strings.TrimPrefix(r.By, "user:")
	case errors.As(err, &qe) && qe.Code == CodeAlreadyDecided && qe.Action != nil:
		res.Action = qe.Action
		if by := qe.Action.DecidedBy; by != nil && strings.HasPrefix(*by, "user:") {
			res.Outcome, res.DecidedBy = BulkAlreadyDecided, strings.TrimPrefix(*by, "user:")
		} else {
			res.Outcome, res.Reason = BulkNotPending, "it is "+string(qe.Action.State)
		}
	case errors.As(err, &qe) && qe.Code == CodeNotFound:
		res.Outcome, res.Reason = BulkNotPending, "no such action"
	case errors.As(err, &qe) && qe.Code == CodeForbidden:
		res.Outcome, res.Reason = BulkNotAllowed, qe.Detail
	case errors.As(err, &qe) && qe.Code != CodeInternal && qe.Code != CodeUnavailable:
		// Any other refusal of this one action (its upstream is down, say)
		// is its own outcome: the others were decided and must be listed.
		res.Action, res.Outcome, res.Reason = qe.Action, BulkNotAllowed, qe.Detail
	default:
		return err
	}
	return nil
}
