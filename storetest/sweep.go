package storetest

import (
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

var expireTests = []test{
	{"PendingAndApproved", func(t *testing.T, s Store) {
		due := newAction(classify.AtMostOnce, "send_customer_email", "exp:pending", at(0))
		due.ExpiresAt = ptr(at(time.Hour))
		submit(t, s, due)
		notDue := newAction(classify.AtMostOnce, "send_customer_email", "exp:later", at(0))
		notDue.ExpiresAt = ptr(at(10 * time.Hour))
		submit(t, s, notDue)
		ap := newAction(classify.AtMostOnce, "send_customer_email", "exp:approved", at(0))
		submit(t, s, ap)
		p := approveParams(ap.ID, "user:ann@example.com", at(10*time.Minute))
		p.ExpiresAt = ptr(at(2 * time.Hour))
		transition(t, s, p)

		now := at(3 * time.Hour)
		got, err := s.ActionExpireDue(t.Context(), queue.DueParams{Now: now, Limit: 100})
		noErr(t, err, "expire due")
		eq(t, len(got), 2, "expired actions")
		byID := map[string]*queue.Action{}
		for _, a := range got {
			byID[a.ID] = a
		}
		for _, a := range []*queue.Action{byID[due.ID], get(t, s, due.ID)} {
			if a == nil {
				t.Fatal("the pending action was not expired")
			}
			eq(t, a.State, queue.StateExpired, "pending: state")
			strPtrEq(t, a.DecidedBy, ptr("system"), "pending: decided by")
			timePtrEq(t, a.DecidedAt, ptr(now), "pending: decided at")
			timePtrEq(t, a.FinishedAt, ptr(now), "pending: finished at")
		}
		for _, a := range []*queue.Action{byID[ap.ID], get(t, s, ap.ID)} {
			if a == nil {
				t.Fatal("the approved action was not expired")
			}
			eq(t, a.State, queue.StateExpired, "approved: state")
			strPtrEq(t, a.DecidedBy, ptr("user:ann@example.com"), "approved: decided by kept")
			timePtrEq(t, a.DecidedAt, ptr(at(10*time.Minute)), "approved: decided at kept")
			timePtrEq(t, a.FinishedAt, ptr(now), "approved: finished at")
		}
		eq(t, get(t, s, notDue.ID).State, queue.StatePending, "not yet due")
		for _, id := range []string{due.ID, ap.ID} {
			evs := events(t, s, id)
			eq(t, evs[0].Kind, queue.EventExpired, "newest event")
			eq(t, evs[0].Actor, "system", "expiry actor")
			timeEq(t, evs[0].At, now, "expiry event at")
		}
		again, err := s.ActionExpireDue(t.Context(), queue.DueParams{Now: now, Limit: 100})
		noErr(t, err, "expire again")
		eq(t, len(again), 0, "expired again")
		eq(t, countKind(eventKinds(t, s, due.ID), queue.EventExpired), 1, "expiry events")
	}},
	{"AtExpiresAtAndLimit", func(t *testing.T, s Store) {
		var all []string
		for i := range 3 {
			a := newAction(classify.AtMostOnce, "send_customer_email", "exp:limit:"+string(rune('a'+i)), at(0))
			a.ExpiresAt = ptr(at(time.Hour))
			all = append(all, submit(t, s, a).ID)
		}
		got, err := s.ActionExpireDue(t.Context(), queue.DueParams{Now: at(time.Hour - time.Second), Limit: 10})
		noErr(t, err, "expire before")
		eq(t, len(got), 0, "expired a second early")
		got, err = s.ActionExpireDue(t.Context(), queue.DueParams{Now: at(time.Hour), Limit: 2})
		noErr(t, err, "expire first batch")
		eq(t, len(got), 2, "first batch")
		got, err = s.ActionExpireDue(t.Context(), queue.DueParams{Now: at(time.Hour), Limit: 2})
		noErr(t, err, "expire second batch")
		eq(t, len(got), 1, "second batch")
		for _, id := range all {
			eq(t, get(t, s, id).State, queue.StateExpired, "state")
		}
	}},
	{"OtherStatesUntouched", func(t *testing.T, s Store) {
		rej := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "exp:rejected", at(0))
		transition(t, s, rejectParams(rej.ID, "user:ann@example.com", at(time.Minute)))
		run := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "exp:running", at(0))
		approve(t, s, run.ID, at(time.Minute))
		transition(t, s, executeParams(run.ID, at(2*time.Minute), at(7*time.Minute)))
		claim := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "exp:claim", at(0))
		rec := submitNew(t, s, classify.AtLeastOnce, "invalidate_cache", "exp:rec", at(0))
		got, err := s.ActionExpireDue(t.Context(), queue.DueParams{Now: at(10000 * time.Hour), Limit: 100})
		noErr(t, err, "expire")
		eq(t, len(got), 0, "expired")
		eq(t, get(t, s, rej.ID).State, queue.StateRejected, "rejected")
		eq(t, get(t, s, run.ID).State, queue.StateInProgress, "executing")
		eq(t, get(t, s, claim.ID).State, queue.StateInProgress, "claimed")
		eq(t, get(t, s, rec.ID).State, queue.StateRecorded, "recorded")
	}},
}
