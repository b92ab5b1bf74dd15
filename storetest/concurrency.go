package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// race runs fn in n goroutines released together by closing a barrier, and
// waits for all of them.
func race(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// waitChange waits (bounded) for a change of action id to state.
func waitChange(t *testing.T, ch <-chan queue.Change, id string, state queue.State) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				t.Fatalf("subscription closed while waiting for %s -> %s", id, state)
			}
			// A new pending action may be announced without its id (see
			// queue.Change).
			if c.State == state && (c.ActionID == id || state == queue.StatePending && c.ActionID == "") {
				return
			}
		case <-deadline:
			t.Fatalf("no change %s -> %s within 10s", id, state)
		}
	}
}

var subscribeTests = []test{
	{"ChangesArrive", func(t *testing.T, s Store) {
		sub := s.SubscribePending()
		ch, cancel := sub.Changes, sub.Cancel
		defer cancel()
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "sub:1", at(0))
		waitChange(t, ch, a.ID, queue.StatePending)
		approve(t, s, a.ID, at(time.Minute))
		waitChange(t, ch, a.ID, queue.StateApproved)
		transition(t, s, executeParams(a.ID, at(2*time.Minute), at(10*time.Minute)))
		waitChange(t, ch, a.ID, queue.StateInProgress)
		_, tk := staleTicket(t, s, "sub:2")
		res, err := s.TicketResolve(t.Context(), resolveParams(tk.ID, queue.StateFailed, at(time.Hour)))
		got := res.Action
		noErr(t, err, "resolve")
		waitChange(t, ch, got.ID, queue.StateFailed)
		b := newAction(classify.AtMostOnce, "send_customer_email", "sub:3", at(0))
		b.ExpiresAt = ptr(at(time.Hour))
		submit(t, s, b)
		_, err = s.ActionExpireDue(t.Context(), queue.ExpiryDue(at(2*time.Hour), 10))
		noErr(t, err, "expire")
		waitChange(t, ch, b.ID, queue.StateExpired)
	}},
	{"CancelCloses", func(t *testing.T, s Store) {
		sub := s.Subscribe()
		ch, cancel := sub.Changes, sub.Cancel
		cancel()
		cancel() // idempotent
		deadline := time.After(10 * time.Second)
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					return
				}
			case <-deadline:
				t.Fatal("channel still open 10s after cancel")
			}
		}
	}},
}

var concurrencyTests = []test{
	{"OneIntentHundredSubmitters", func(t *testing.T, s Store) {
		for _, class := range []classify.Class{classify.AtMostOnce, classify.ExactlyOnce} {
			const n = 100
			key := "race:" + string(class)
			holders := make([]*queue.Action, n)
			created, replays := make([]bool, n), make([]bool, n)
			errs := make([]error, n)
			race(n, func(i int) {
				a := newAction(class, "tool_"+string(class), key, at(time.Duration(i)*time.Millisecond))
				var res queue.ActionSubmitResult
				res, errs[i] = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a)})
				holders[i], created[i], replays[i] = res.Holder, res.Created, res.ReplayRecorded
			})
			recorded := 0
			for _, r := range replays {
				if r {
					recorded++
				}
			}
			winner := -1
			for i := range n {
				noErr(t, errs[i], fmt.Sprintf("%s: submitter %d", class, i))
				if created[i] {
					if winner >= 0 {
						t.Fatalf("%s: submitters %d and %d both created an action", class, winner, i)
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatalf("%s: nobody created the action", class)
			}
			for i := range n {
				eq(t, holders[i].ID, holders[winner].ID, fmt.Sprintf("%s: holder seen by submitter %d", class, i))
				eq(t, holders[i].Attempt, 1, "attempt")
			}
			list, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: key, Limit: 200})
			noErr(t, err, "list")
			eq(t, len(list), 1, string(class)+": actions stored")
			// One submitted event, plus the replays the store recorded (the
			// Service records the others): for an exactly-once claim in
			// progress a replay is refused, not replayed.
			kinds := eventKinds(t, s, holders[winner].ID)
			eq(t, len(kinds), 1+recorded, string(class)+": events of the holder")
			eq(t, countKind(kinds, queue.EventSubmitted), 1, string(class)+": submitted events")
			replayKind := queue.EventReplayed
			if class == classify.ExactlyOnce {
				replayKind = queue.EventInProgressSeen
			}
			eq(t, countKind(kinds, replayKind), recorded, string(class)+": replay events the store recorded")
		}
	}},
	{"TwentyApprovers", func(t *testing.T, s Store) {
		const n = 20
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "race:approve", at(0))
		got := make([]*queue.Action, n)
		errs := make([]error, n)
		race(n, func(i int) {
			got[i], errs[i] = s.ActionTransition(t.Context(), approveParams(a.ID, fmt.Sprintf("user:u%d@example.com", i), at(time.Minute)))
		})
		winner := -1
		for i := range n {
			switch {
			case errs[i] == nil:
				if winner >= 0 {
					t.Fatalf("approvers %d and %d both succeeded", winner, i)
				}
				winner = i
			case errors.Is(errs[i], queue.ErrStateMismatch):
			default:
				t.Fatalf("approver %d: %v", i, errs[i])
			}
		}
		if winner < 0 {
			t.Fatal("no approval succeeded")
		}
		want := fmt.Sprintf("user:u%d@example.com", winner)
		for i := range n {
			eq(t, got[i].State, queue.StateApproved, fmt.Sprintf("state seen by approver %d", i))
			strPtrEq(t, got[i].DecidedBy, ptr(want), fmt.Sprintf("decider seen by approver %d", i))
		}
		eq(t, countKind(eventKinds(t, s, a.ID), queue.EventApproved), 1, "approval events")
	}},
	{"DecisionsRaceExpiry", func(t *testing.T, s Store) {
		// Approve, reject, cancel and the expiry sweep on one due action:
		// exactly one wins, whichever commits first.
		for round := range 5 {
			a := newAction(classify.AtMostOnce, "send_customer_email", fmt.Sprintf("race:decide:%d", round), at(0))
			a.ExpiresAt = ptr(at(time.Hour))
			submit(t, s, a)
			now := at(time.Hour - time.Second)
			wins := make([]bool, 4)
			errs := make([]error, 4)
			race(4, func(i int) {
				var err error
				switch i {
				case 0:
					_, err = s.ActionTransition(t.Context(), approveParams(a.ID, "user:ann@example.com", now))
				case 1:
					_, err = s.ActionTransition(t.Context(), rejectParams(a.ID, "user:bob@example.com", now))
				case 2:
					p := cancelParams(a.ID, now)
					p.From = []queue.State{queue.StatePending} // cancelling an approval would be a second decision
					_, err = s.ActionTransition(t.Context(), p)
				case 3:
					var got []*queue.Action
					got, err = s.ActionExpireDue(t.Context(), queue.ExpiryDue(at(time.Hour), 10))
					wins[i] = err == nil && len(got) == 1
					errs[i] = err
					return
				}
				wins[i] = err == nil
				if err != nil && !errors.Is(err, queue.ErrStateMismatch) {
					errs[i] = err
				}
			})
			n := 0
			for i := range 4 {
				noErr(t, errs[i], fmt.Sprintf("round %d, contender %d", round, i))
				if wins[i] {
					n++
				}
			}
			eq(t, n, 1, fmt.Sprintf("round %d: winners", round))
			kinds := eventKinds(t, s, a.ID)
			eq(t, len(kinds), 2, fmt.Sprintf("round %d: events (submitted and the winner's)", round))
		}
	}},
	{"ReclaimAfterFailure", func(t *testing.T, s Store) {
		const n = 30
		first := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "race:reclaim", at(0))
		transition(t, s, failParams(first.ID, at(time.Minute), "timeout at the bank, checked: not booked"))
		holders := make([]*queue.Action, n)
		created := make([]bool, n)
		errs := make([]error, n)
		race(n, func(i int) {
			a := newAction(classify.ExactlyOnce, "issue_refund", "race:reclaim", at(time.Hour))
			var res queue.ActionSubmitResult
			res, errs[i] = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a)})
			holders[i], created[i] = res.Holder, res.Created
		})
		winner := -1
		for i := range n {
			noErr(t, errs[i], fmt.Sprintf("re-claimer %d", i))
			if created[i] {
				if winner >= 0 {
					t.Fatalf("re-claimers %d and %d both created an attempt", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatal("nobody re-claimed the intent")
		}
		for i := range n {
			eq(t, holders[i].ID, holders[winner].ID, fmt.Sprintf("holder seen by re-claimer %d", i))
			eq(t, holders[i].Attempt, 2, fmt.Sprintf("attempt seen by re-claimer %d", i))
		}
		list, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: "race:reclaim", Limit: 100})
		noErr(t, err, "list")
		eq(t, len(list), 2, "attempts stored")
	}},
	{"FiftyWriters", func(t *testing.T, s Store) {
		// Different intents never wait on each other for correctness, and no
		// writer may see a lock error, however many write at once.
		const n = 50
		errs := make([]error, n)
		ids := make([]string, n)
		begin := time.Now()
		race(n, func(i int) {
			errs[i] = func() error {
				ctx := t.Context()
				now := at(time.Duration(i) * time.Second)
				a := newAction(classify.ExactlyOnce, "issue_refund", fmt.Sprintf("race:writer:%d", i), now)
				res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEvent(a)})
				got, created := res.Holder, res.Created
				if err != nil {
					return fmt.Errorf("submit: %w", err)
				}
				if !created {
					return fmt.Errorf("submit: intent of writer %d held by %s", i, got.ID)
				}
				ids[i] = got.ID
				if err := s.EventInsert(ctx, queue.Event{ActionID: got.ID, Kind: queue.EventReplayed, Actor: agent, At: now}); err != nil {
					return fmt.Errorf("event: %w", err)
				}
				if _, err := s.ActionTransition(ctx, completeParams(got.ID, now.Add(time.Second), `{"ok":true}`)); err != nil {
					return fmt.Errorf("complete: %w", err)
				}
				b := newAction(classify.AtMostOnce, "send_customer_email", fmt.Sprintf("race:writer:mail:%d", i), now)
				if _, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: b, Event: submittedEvent(b)}); err != nil {
					return fmt.Errorf("submit mail: %w", err)
				}
				if _, err := s.ActionTransition(ctx, approveParams(b.ID, "user:ann@example.com", now.Add(time.Second))); err != nil {
					return fmt.Errorf("approve: %w", err)
				}
				return nil
			}()
		})
		elapsed := time.Since(begin)
		for i := range n {
			noErr(t, errs[i], fmt.Sprintf("writer %d", i))
		}
		for _, id := range ids {
			eq(t, get(t, s, id).State, queue.StateDone, "state")
		}
		counts, err := s.ActionCountByState(t.Context())
		noErr(t, err, "count")
		eq(t, counts[queue.StateDone], n, "done")
		eq(t, counts[queue.StateApproved], n, "approved")
		t.Logf("%d writers x 5 writes: %v", n, elapsed)
	}},
}
