package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/queue"
)

// verifierParams is a verifier's automatic resolution of ticket id.
func verifierParams(id string, outcome queue.State, now time.Time) queue.TicketResolveParams {
	return queue.TicketResolveParams{TicketID: id, Now: now, By: "verifier:issue_refund", Outcome: outcome,
		Result: []byte(`{"refund_id":"re_42"}`), Note: "verified by the payment provider", Channel: queue.ChannelVerifier}
}

var verifyTests = []test{
	{"AutoResolutionRacesOperatorAndLateReport", func(t *testing.T, s Store) {
		// A verifier's proof, an operator's finding and the agent's late
		// report arrive at once on one stale ticket: one decides, the
		// others are refused as docs/verifiers.md says, nothing is resolved twice.
		for round := range lockOrderRounds {
			what := fmt.Sprintf("round %d", round)
			a, tk := staleTicket(t, s, fmt.Sprintf("verify:race:%d", round))
			now := at(time.Hour)
			var errs [3]error
			race(3, func(i int) {
				switch i {
				case 0:
					_, errs[i] = s.TicketResolve(t.Context(), verifierParams(tk.ID, queue.StateDone, now))
				case 1:
					_, errs[i] = s.TicketResolve(t.Context(), resolveParams(tk.ID, queue.StateFailed, now))
				case 2:
					_, errs[i] = s.ActionTransition(t.Context(), lateReport(a.ID, queue.StateFailed, now))
				}
			})
			winner := -1
			for i, refusal := range []error{queue.ErrTicketNotOpen, queue.ErrTicketNotOpen, queue.ErrStateMismatch} {
				switch {
				case errs[i] == nil:
					if winner >= 0 {
						t.Fatalf("%s: contenders %d and %d both decided", what, winner, i)
					}
					winner = i
				case !errors.Is(errs[i], refusal):
					t.Fatalf("%s: contender %d: %v, want nil or %v", what, i, errs[i], refusal)
				}
			}
			cur := get(t, s, a.ID)
			want := []struct {
				state queue.State
				by    string
			}{{queue.StateDone, "verifier:issue_refund"}, {queue.StateFailed, "user:ops@example.com"}, {queue.StateFailed, agent}}
			if winner < 0 {
				t.Fatalf("%s: nobody decided", what)
			}
			eq(t, cur.State, want[winner].state, what+": state")
			wantTicket(t, cur, tk.ID, queue.TicketResolved)
			strPtrEq(t, cur.Ticket.ResolvedBy, ptr(want[winner].by), what+": resolved by")
			if winner == 0 {
				jsonEq(t, cur.Result, []byte(`{"refund_id":"re_42"}`), what+": the provider's record as result")
			}
			kinds := eventKinds(t, s, a.ID)
			eq(t, countKind(kinds, queue.EventTicketResolved), 1, what+": ticket_resolved events")
			eq(t, countKind(kinds, queue.EventCompleted)+countKind(kinds, queue.EventFailed), 1, what+": outcome events")
		}
	}},
	{"CheckDueOncePerRound", func(t *testing.T, s Store) {
		// Several sweeps claim the verifier rounds of many tickets at once:
		// each ticket's round is claimed by one of them, and the next round
		// comes 1, 2, 4 … minutes later while the verdict stays unknown.
		const tickets, sweeps = 12, 4
		var one *queue.Ticket
		for i := range tickets {
			_, one = staleTicket(t, s, fmt.Sprintf("verify:due:%d", i))
		}
		if _, err := s.TicketCheckGet(t.Context(), one.ID); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("schedule of a ticket never asked about: %v, want ErrNotFound", err)
		}
		tools := []string{"issue_refund"}
		claim := func(now time.Time) map[string]int {
			got := map[string]int{}
			var mu sync.Mutex
			errs := make([]error, sweeps)
			race(sweeps, func(i int) {
				list, err := s.TicketCheckDue(t.Context(), queue.TicketCheckDueParams{Now: now, Tools: tools, Limit: 5})
				errs[i] = err
				mu.Lock()
				for _, tk := range list {
					got[tk.ID]++
				}
				mu.Unlock()
			})
			for _, err := range errs {
				noErr(t, err, "claim rounds")
			}
			for id, n := range got {
				if n > 1 {
					t.Fatalf("ticket %s claimed %d times in one round", id, n)
				}
			}
			return got
		}
		base := at(time.Hour)
		total := 0
		for range tickets { // Limit 5 per sweep: a few passes take them all
			total += len(claim(base))
		}
		eq(t, total, tickets, "tickets asked about at once")
		eq(t, len(claim(base.Add(59*time.Second))), 0, "rounds claimed before the next is due")
		first := claim(base.Add(time.Minute))
		first2 := claim(base.Add(time.Minute))
		first3 := claim(base.Add(time.Minute))
		eq(t, len(first)+len(first2)+len(first3), tickets, "second rounds (after 1 minute)")
		eq(t, len(claim(base.Add(2*time.Minute))), 0, "third rounds before 2 more minutes")
		sched, err := s.TicketCheckGet(t.Context(), one.ID)
		noErr(t, err, "schedule")
		eq(t, sched.Checks, 2, "rounds of a ticket")
		eq(t, sched.Verdict, "unknown", "verdict of a ticket")
		if !sched.NextAt.Equal(base.Add(3 * time.Minute)) {
			t.Fatalf("next round at %s, want %s (2 minutes after the second)", sched.NextAt, base.Add(3*time.Minute))
		}
		// One ticket proven done: never asked again.
		var proven string
		for id := range first {
			proven = id
			break
		}
		tk, err := s.TicketGetByID(t.Context(), proven)
		noErr(t, err, "ticket")
		noErr(t, s.TicketCheckRecord(t.Context(), queue.TicketCheckRecordParams{TicketID: proven, Verdict: "done",
			Event: queue.Event{ActionID: tk.ActionID, Kind: queue.EventVerified, Actor: "verifier:issue_refund",
				Channel: queue.ChannelVerifier, At: base, Data: []byte(`{"verdict":"done"}`)}}), "record")
		sched, err = s.TicketCheckGet(t.Context(), proven)
		noErr(t, err, "schedule")
		eq(t, sched.Verdict, "done", "verdict of a ticket proven done")
		later := map[string]int{}
		for range tickets {
			for id, n := range claim(base.Add(3 * time.Minute)) {
				later[id] += n
			}
		}
		eq(t, len(later), tickets-1, "third rounds (after 2 more minutes)")
		eq(t, later[proven], 0, "rounds of a ticket proven done")
		// A resolved ticket is never asked about; a tool without a verifier neither.
		got, err := s.TicketCheckDue(t.Context(), queue.TicketCheckDueParams{Now: base.Add(24 * time.Hour), Tools: []string{"other"}, Limit: 100})
		noErr(t, err, "claim other tool")
		eq(t, len(got), 0, "rounds of tools without a verifier")
		eq(t, countKind(eventKinds(t, s, tk.ActionID), queue.EventVerified), 1, "verified events")
	}},
	{"VerifySlotOncePerInterval", func(t *testing.T, s Store) {
		// Many agent asks about one action take its verifier slot at once:
		// one takes it, the others learn when it was taken; after the
		// interval one more takes it.
		const askers = 16
		a, _ := staleTicket(t, s, "verify:slot")
		take := func(now time.Time) (taken int, askedAt []time.Time) {
			slots := make([]queue.VerifySlot, askers)
			errs := make([]error, askers)
			race(askers, func(i int) {
				slots[i], errs[i] = s.VerifySlotTake(t.Context(), queue.VerifySlotTakeParams{ActionID: a.ID, Now: now, Interval: queue.VerifyAgentInterval})
			})
			for i, sl := range slots {
				noErr(t, errs[i], "take the slot")
				if sl.Taken {
					taken++
				}
				askedAt = append(askedAt, sl.AskedAt)
			}
			return taken, askedAt
		}
		wantAt := func(got []time.Time, want time.Time, what string) {
			t.Helper()
			for _, at := range got {
				if !at.Equal(want) {
					t.Fatalf("%s: slot taken at %s, want %s", what, at, want)
				}
			}
		}
		base := at(time.Hour)
		n, asked := take(base)
		eq(t, n, 1, "asks that took the slot at once")
		wantAt(asked, base, "at once")
		n, asked = take(base.Add(queue.VerifyAgentInterval - time.Millisecond))
		eq(t, n, 0, "asks that took the slot before the interval")
		wantAt(asked, base, "before the interval")
		n, asked = take(base.Add(queue.VerifyAgentInterval))
		eq(t, n, 1, "asks that took the slot after the interval")
		wantAt(asked, base.Add(queue.VerifyAgentInterval), "after the interval")
		// Another action's slot is its own; an unknown action has none.
		b, _ := staleTicket(t, s, "verify:slot:other")
		sl, err := s.VerifySlotTake(t.Context(), queue.VerifySlotTakeParams{ActionID: b.ID, Now: base, Interval: queue.VerifyAgentInterval})
		noErr(t, err, "take another action's slot")
		eq(t, sl.Taken, true, "another action's slot taken")
		_, err = s.VerifySlotTake(t.Context(), queue.VerifySlotTakeParams{ActionID: queue.NewID(base), Now: base, Interval: queue.VerifyAgentInterval})
		if !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("slot of an unknown action: %v, want ErrNotFound", err)
		}
	}},
}
