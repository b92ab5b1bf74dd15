package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// Every path that touches an action and its ticket (operator resolution, a
// late report from the agent, the sweep) locks the action first, then the
// ticket. These races release all of them at once on one stale action:
// a path that took the locks the other way round deadlocks, which
// PostgreSQL breaks by failing one of them with an error the caller would
// see as a 5xx. Each round is a fresh action, so that the goroutines meet
// in several interleavings.
const lockOrderRounds = 32

// lateReport is a late complete (outcome done) or fail of action id at now.
func lateReport(id string, outcome queue.State, now time.Time) queue.ActionTransitionParams {
	p := failParams(id, now, "declined after all")
	if outcome == queue.StateDone {
		p = completeParams(id, now, `{"refund_id":"late"}`)
	}
	p.ResolveStale = queue.LateResolution(p.Event, p.To, queue.LateReportNote)
	return p
}

// sweep runs what the Service's sweep runs, in its order.
func sweep(ctx context.Context, s Store, now time.Time) ([]*queue.Ticket, error) {
	if _, err := s.ActionExpireDue(ctx, queue.ExpiryDue(now, 500)); err != nil {
		return nil, fmt.Errorf("expire: %w", err)
	}
	return s.TicketOpenStale(ctx, queue.StaleDue(now, 500))
}

var lockOrderTests = []test{
	{"OperatorLateReportAndSweep", func(t *testing.T, s Store) {
		// One stale action with its open ticket; the operator resolves the
		// ticket while the agent's complete and fail arrive late and a
		// sweep runs. Exactly one of the three decides the outcome; the
		// others get their domain refusal, never a lock error.
		for round := range lockOrderRounds {
			what := fmt.Sprintf("round %d", round)
			a, tk := staleTicket(t, s, fmt.Sprintf("lock:op:%d", round))
			now := at(time.Hour)
			operatorOutcome := []queue.State{queue.StateDone, queue.StateFailed}[round%2]
			var (
				opAction    *queue.Action
				reported    [2]*queue.Action
				errs        [4]error
				sweptTicket []*queue.Ticket
			)
			race(4, func(i int) {
				switch i {
				case 0:
					p := resolveParams(tk.ID, operatorOutcome, now)
					var res queue.TicketResolveResult
					res, errs[i] = s.TicketResolve(t.Context(), p)
					opAction = res.Action
				case 1, 2:
					outcome := []queue.State{queue.StateDone, queue.StateFailed}[i-1]
					reported[i-1], errs[i] = s.ActionTransition(t.Context(), lateReport(a.ID, outcome, now))
				case 3:
					sweptTicket, errs[i] = sweep(t.Context(), s, now)
				}
			})
			noErr(t, errs[3], what+": sweep")
			eq(t, len(sweptTicket), 0, what+": tickets the sweep opened (one is open, then the action is finished)")

			winner, outcome, resolver := -1, queue.State(""), ""
			for i, refusal := range []error{queue.ErrTicketNotOpen, queue.ErrStateMismatch, queue.ErrStateMismatch} {
				switch {
				case errs[i] == nil:
					if winner >= 0 {
						t.Fatalf("%s: contenders %d and %d both decided the outcome", what, winner, i)
					}
					winner = i
				case !errors.Is(errs[i], refusal):
					t.Fatalf("%s: contender %d: error %v, want nil or %v", what, i, errs[i], refusal)
				}
			}
			switch winner {
			case -1:
				t.Fatalf("%s: nobody decided the outcome", what)
			case 0:
				outcome, resolver = operatorOutcome, "user:ops@example.com"
			default:
				outcome, resolver = []queue.State{queue.StateDone, queue.StateFailed}[winner-1], agent
			}

			cur := get(t, s, a.ID)
			eq(t, cur.State, outcome, what+": state")
			wantTicket(t, cur, tk.ID, queue.TicketResolved)
			strPtrEq(t, cur.Ticket.ResolvedBy, ptr(resolver), what+": resolved by")
			if cur.Ticket.Outcome == nil || *cur.Ticket.Outcome != outcome {
				t.Fatalf("%s: ticket outcome %v, want %s", what, cur.Ticket.Outcome, outcome)
			}
			// The losers are answered with the row as it now stands, which
			// the Service shows with its 409.
			if opAction == nil {
				t.Fatalf("%s: operator answered without the action", what)
			}
			eq(t, opAction.State, outcome, what+": state the operator was shown")
			for i, r := range reported {
				if r == nil {
					t.Fatalf("%s: late report %d answered without the action", what, i)
				}
				eq(t, r.State, outcome, fmt.Sprintf("%s: state late report %d was shown", what, i))
			}

			kinds := eventKinds(t, s, a.ID)
			eq(t, countKind(kinds, queue.EventTicketResolved), 1, what+": ticket_resolved events")
			// One outcome, one outcome event, whoever won: the agent's
			// report or the operator's finding (which notifies as much).
			eq(t, countKind(kinds, queue.EventCompleted)+countKind(kinds, queue.EventFailed), 1,
				what+": completed and failed events")
			tickets, err := s.TicketList(t.Context(), queue.TicketListParams{ActionID: a.ID, Limit: 10})
			noErr(t, err, "list tickets")
			eq(t, len(tickets), 1, what+": tickets of the action")
		}
		n, err := s.TicketCountOpen(t.Context())
		noErr(t, err, "count")
		eq(t, n, 0, "open tickets")
	}},
	{"SweepAndLateReport", func(t *testing.T, s Store) {
		// The claim timed out and no ticket is open yet: the sweep opens
		// one while the agent's complete and fail arrive. One report wins;
		// a ticket the sweep opened is resolved by it, or, when the report
		// committed first without seeing it, stays open on the finished
		// action for the operator, who then changes nothing.
		for round := range lockOrderRounds {
			what := fmt.Sprintf("round %d", round)
			a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", fmt.Sprintf("lock:sweep:%d", round), at(0))
			now := at(time.Hour)
			var (
				errs   [3]error
				opened []*queue.Ticket
			)
			race(3, func(i int) {
				if i == 2 {
					opened, errs[i] = sweep(t.Context(), s, now)
					return
				}
				outcome := []queue.State{queue.StateDone, queue.StateFailed}[i]
				_, errs[i] = s.ActionTransition(t.Context(), lateReport(a.ID, outcome, now))
			})
			noErr(t, errs[2], what+": sweep")
			winner := -1
			for i := range 2 {
				switch {
				case errs[i] == nil:
					if winner >= 0 {
						t.Fatalf("%s: both late reports won", what)
					}
					winner = i
				case !errors.Is(errs[i], queue.ErrStateMismatch):
					t.Fatalf("%s: late report %d: error %v, want nil or %v", what, i, errs[i], queue.ErrStateMismatch)
				}
			}
			if winner < 0 {
				t.Fatalf("%s: no late report won", what)
			}
			outcome := []queue.State{queue.StateDone, queue.StateFailed}[winner]
			eq(t, get(t, s, a.ID).State, outcome, what+": state")

			tickets, err := s.TicketList(t.Context(), queue.TicketListParams{ActionID: a.ID, Limit: 10})
			noErr(t, err, "list tickets")
			eq(t, len(tickets), len(opened), what+": tickets of the action (the ones the sweep opened)")
			if len(tickets) > 1 {
				t.Fatalf("%s: %d tickets for one action", what, len(tickets))
			}
			resolvedEvents := countKind(eventKinds(t, s, a.ID), queue.EventTicketResolved)
			if len(tickets) == 0 {
				eq(t, resolvedEvents, 0, what+": ticket_resolved events without a ticket")
				continue
			}
			tk := tickets[0]
			if tk.State == queue.TicketOpen {
				eq(t, resolvedEvents, 0, what+": ticket_resolved events of an open ticket")
				res, err := s.TicketResolve(t.Context(), resolveParams(tk.ID, queue.StateFailed, at(2*time.Hour)))
				got := res.Action
				noErr(t, err, what+": operator closes the ticket the report did not see")
				eq(t, got.State, outcome, what+": the operator's finding changes no state")
				continue
			}
			eq(t, resolvedEvents, 1, what+": ticket_resolved events")
			strPtrEq(t, tk.ResolvedBy, ptr(agent), what+": resolved by")
			if tk.Outcome == nil || *tk.Outcome != outcome {
				t.Fatalf("%s: ticket outcome %v, want %s", what, tk.Outcome, outcome)
			}
		}
		n, err := s.TicketCountOpen(t.Context())
		noErr(t, err, "count")
		eq(t, n, 0, "open tickets")
	}},
}
