package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// quorumAction is a pending action whose tool needs required approvals from
// the members of approvers, widened to escalate once escalated.
func quorumAction(key string, required int, approvers, escalate []string, now time.Time) *queue.Action {
	a := newAction(classify.AtMostOnce, "send_customer_email", key, now)
	a.Spec.Approval = &classify.Approval{Required: required, Approvers: []string{"leads"}, ApproverEmails: approvers,
		EscalateTo: []string{"night"}, EscalateEmails: escalate}
	a.ApprovalsRequired = required
	return a
}

func decideParams(id string, to queue.State, by string, now time.Time) queue.ActionDecideParams {
	kind := map[queue.State]string{queue.StateApproved: queue.EventApproved, queue.StateRejected: queue.EventRejected,
		queue.StateChangesRequested: queue.EventChangesRequested}[to]
	return queue.ActionDecideParams{ID: id, To: to, By: by, Note: "note of " + by, Channel: "dashboard", Now: now,
		ExpiresAt: now.Add(72 * time.Hour),
		Event:     queue.Event{ActionID: id, Kind: kind, Actor: by, Channel: "dashboard", At: now}}
}

func users(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("u%d@example.com", i)
	}
	return out
}

// kindCounts counts an action's events by kind.
func kindCounts(t *testing.T, s Store, id string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, k := range eventKinds(t, s, id) {
		out[k]++
	}
	return out
}

var decideTests = []test{
	{"QuorumCountsDistinctUsers", func(t *testing.T, s Store) {
		a := submit(t, s, quorumAction("q:1", 2, users(3), nil, at(0)))
		res, err := s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:u0@example.com", at(time.Minute)))
		got, out := res.Action, res.Outcome
		noErr(t, err, "first approval")
		eq(t, out, queue.DecideCounted, "first approval: outcome")
		eq(t, got.State, queue.StatePending, "first approval: state")
		eq(t, len(got.Approvals), 1, "first approval: approvals")
		eq(t, got.ApprovalsRequired, 2, "approvals_required")

		res, err = s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:u0@example.com", at(2*time.Minute)))
		got, out = res.Action, res.Outcome
		noErr(t, err, "same user again")
		eq(t, out, queue.DecideReplayed, "same user again: outcome")
		eq(t, len(got.Approvals), 1, "same user again: approvals")

		res, err = s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:u1@example.com", at(3*time.Minute)))
		got, out = res.Action, res.Outcome
		noErr(t, err, "second user")
		eq(t, out, queue.DecideTransitioned, "second user: outcome")
		eq(t, got.State, queue.StateApproved, "second user: state")
		eq(t, *got.DecidedBy, "user:u1@example.com", "decided_by is the user who completed the quorum")
		eq(t, len(got.Approvals), 2, "approvals")
		eq(t, got.Approvals[0].By, "user:u0@example.com", "approvals[0].by")
		eq(t, got.Approvals[0].Note, "note of user:u0@example.com", "approvals[0].note")
		eq(t, got.Approvals[0].At, at(time.Minute), "approvals[0].at")
		eq(t, string(got.ApprovedPayload), string(a.Payload), "approved_payload")
		eq(t, *got.ExpiresAt, at(3*time.Minute+72*time.Hour), "expires_at moves to the approval")
		kinds := kindCounts(t, s, a.ID)
		eq(t, kinds[queue.EventApprovalCounted], 1, "approval_counted events")
		eq(t, kinds[queue.EventApproved], 1, "approved events")

		_, err = s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:u2@example.com", at(4*time.Minute)))
		if !errors.Is(err, queue.ErrStateMismatch) {
			t.Fatalf("approving an approved action: err = %v, want ErrStateMismatch", err)
		}
		eq(t, len(get(t, s, a.ID).Approvals), 2, "approvals after a late approval")
	}},
	{"IneligibleChangesNothing", func(t *testing.T, s Store) {
		a := submit(t, s, quorumAction("q:2", 1, users(2), []string{"night@example.com"}, at(0)))
		for _, to := range []queue.State{queue.StateApproved, queue.StateRejected, queue.StateChangesRequested} {
			res, err := s.ActionDecide(t.Context(), decideParams(a.ID, to, "user:mallory@example.com", at(time.Minute)))
			got := res.Action
			if queue.ErrorCode(err) != queue.CodeForbidden {
				t.Fatalf("%s by an outsider: err = %v, want forbidden", to, err)
			}
			eq(t, got.ID, a.ID, string(to)+": the refusal carries the action")
		}
		// escalate_to may decide only once the action is escalated.
		_, err := s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:night@example.com", at(time.Minute)))
		if queue.ErrorCode(err) != queue.CodeForbidden {
			t.Fatalf("escalate_to before escalation: err = %v, want forbidden", err)
		}
		now := get(t, s, a.ID)
		eq(t, now.State, queue.StatePending, "state")
		eq(t, len(now.Approvals), 0, "approvals")
		eq(t, len(kindCounts(t, s, a.ID)), 1, "event kinds (only submitted)")
		// Email comparison ignores case, as the users table does.
		res, err := s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:U1@Example.com", at(2*time.Minute)))
		got := res.Action
		noErr(t, err, "approval by a member with another spelling")
		eq(t, got.State, queue.StateApproved, "state")
	}},
	{"RejectAndRequestChangesDecideAtOnce", func(t *testing.T, s Store) {
		for _, to := range []queue.State{queue.StateRejected, queue.StateChangesRequested} {
			a := submit(t, s, quorumAction("q:3:"+string(to), 3, users(3), nil, at(0)))
			_, err := s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:u0@example.com", at(time.Minute)))
			noErr(t, err, "one approval")
			res, err := s.ActionDecide(t.Context(), decideParams(a.ID, to, "user:u1@example.com", at(2*time.Minute)))
			got, out := res.Action, res.Outcome
			noErr(t, err, string(to))
			eq(t, out, queue.DecideTransitioned, string(to)+": outcome")
			eq(t, got.State, to, "state")
			eq(t, *got.DecidedBy, "user:u1@example.com", string(to)+": decided_by")
			eq(t, *got.DecisionNote, "note of user:u1@example.com", string(to)+": decision_note")
			eq(t, *got.FinishedAt, at(2*time.Minute), string(to)+": finished_at")
			eq(t, kindCounts(t, s, a.ID)[string(to)], 1, string(to)+": its event")
		}
	}},
	{"ChangesRequestedReleasesTheIntent", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "q:4", at(0))
		_, err := s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateChangesRequested, "user:ann@example.com", at(time.Minute)))
		noErr(t, err, "request changes")
		next := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "q:4", at(2*time.Minute))
		eq(t, next.Attempt, 2, "the revision's attempt")
		eq(t, next.State, queue.StatePending, "the revision needs a fresh approval")
	}},
	{"NoApprovalAfterExpiry", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "q:5", at(0))
		res, err := s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:ann@example.com", at(72*time.Hour)))
		got := res.Action
		if !errors.Is(err, queue.ErrStateMismatch) {
			t.Fatalf("approval at expires_at: err = %v, want ErrStateMismatch", err)
		}
		eq(t, got.State, queue.StatePending, "the refusal carries the (unswept) action")
		eq(t, len(get(t, s, a.ID).Approvals), 0, "approvals")
	}},
	{"UnknownAction", func(t *testing.T, s Store) {
		for _, id := range []string{queue.NewID(at(0)), "not-a-uuid"} {
			_, err := s.ActionDecide(t.Context(), decideParams(id, queue.StateApproved, "user:ann@example.com", at(0)))
			if !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("decide %q: err = %v, want ErrNotFound", id, err)
			}
		}
	}},
	{"ConcurrentQuorum", func(t *testing.T, s Store) {
		// 20 approvals by 10 eligible users (each twice), 3 required:
		// exactly one transition, exactly three counted approvals.
		a := submit(t, s, quorumAction("q:6", 3, users(10), nil, at(0)))
		outcomes := make([]queue.DecideOutcome, 20)
		errs := make([]error, 20)
		race(20, func(i int) {
			var res queue.ActionDecideResult
			res, errs[i] = s.ActionDecide(t.Context(),
				decideParams(a.ID, queue.StateApproved, fmt.Sprintf("user:u%d@example.com", i%10), at(time.Minute)))
			outcomes[i] = res.Outcome
		})
		count := map[queue.DecideOutcome]int{}
		for i, err := range errs {
			switch {
			case err == nil:
				count[outcomes[i]]++
			case errors.Is(err, queue.ErrStateMismatch):
				count[0]++
			default:
				t.Fatalf("approval %d: %v", i, err)
			}
		}
		eq(t, count[queue.DecideTransitioned], 1, "transitions")
		eq(t, count[queue.DecideCounted], 2, "approvals counted without a transition")
		got := get(t, s, a.ID)
		eq(t, got.State, queue.StateApproved, "state")
		eq(t, len(got.Approvals), 3, "stored approvals")
		kinds := kindCounts(t, s, a.ID)
		eq(t, kinds[queue.EventApproved], 1, "approved events")
		eq(t, kinds[queue.EventApprovalCounted], 2, "approval_counted events")
	}},
}
