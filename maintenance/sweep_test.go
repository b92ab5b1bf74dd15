package maintenance_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
)

// A claim held longer than claim_timeout gets one stale ticket, however
// many processes sweep at once; the sweep never releases it, and a late
// report from the agent settles both the action and the ticket.
func TestStaleClaimLateAgentReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		claim   func(e *apptest.Env) *queue.Action // an in_progress action held by agent "bot"
		timeout time.Duration
		report  func(e *apptest.Env, id string) (queue.DriveResult, error)
		want    queue.State
	}{
		{
			name: "exactly-once, late complete",
			claim: func(e *apptest.Env) *queue.Action {
				return e.Submit("issue_refund", map[string]any{"order_id": "o-1", "line_id": 1})
			},
			timeout: 2 * time.Minute,
			report: func(e *apptest.Env, id string) (queue.DriveResult, error) {
				return e.Service.Complete(ctx, id, "bot", json.RawMessage(`{"refund":"re_1"}`), "api")
			},
			want: queue.StateDone,
		},
		{
			name: "exactly-once, late fail",
			claim: func(e *apptest.Env) *queue.Action {
				return e.Submit("issue_refund", map[string]any{"order_id": "o-2", "line_id": 1})
			},
			timeout: 2 * time.Minute,
			report: func(e *apptest.Env, id string) (queue.DriveResult, error) {
				return e.Service.Fail(ctx, id, "bot", "card declined", "api")
			},
			want: queue.StateFailed,
		},
		{
			name: "at-most-once executed by the agent, late complete",
			claim: func(e *apptest.Env) *queue.Action {
				a := e.Submit("send_customer_email", map[string]any{"customer_id": "c-1", "topic": "late"})
				apptest.Approve(e.T, e.Service, a.ID)
				got, err := e.Service.Execute(ctx, a.ID, "bot", "api")
				if err != nil {
					e.T.Fatal(err)
				}
				return got
			},
			timeout: 10 * time.Minute,
			report: func(e *apptest.Env, id string) (queue.DriveResult, error) {
				return e.Service.Complete(ctx, id, "bot", json.RawMessage(`{"message":"m-1"}`), "api")
			},
			want: queue.StateDone,
		},
		{
			name: "at-most-once executed by the agent, late fail",
			claim: func(e *apptest.Env) *queue.Action {
				a := e.Submit("send_customer_email", map[string]any{"customer_id": "c-2", "topic": "late"})
				apptest.Approve(e.T, e.Service, a.ID)
				got, err := e.Service.Execute(ctx, a.ID, "bot", "api")
				if err != nil {
					e.T.Fatal(err)
				}
				return got
			},
			timeout: 10 * time.Minute,
			report: func(e *apptest.Env, id string) (queue.DriveResult, error) {
				return e.Service.Fail(ctx, id, "bot", "mailbox rejected it", "api")
			},
			want: queue.StateFailed,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := apptest.DomainEnv(t, testclock.Frozen())
			sweepers := []*maintenance.Sweeper{e.Sweeper(), e.AddProcess().Sweeper(), e.AddProcess().Sweeper()}
			a := tc.claim(e)
			if a.State != queue.StateInProgress {
				t.Fatalf("claim: %s", a.State)
			}
			if a.ClaimedAt == nil || !a.ClaimedAt.Equal(e.Service.Now()) {
				t.Fatalf("claimed at %v, want the frozen now %v", a.ClaimedAt, e.Service.Now())
			}
			deadline := a.ClaimedAt.Add(tc.timeout)
			e.Clock.Advance(tc.timeout - time.Microsecond) // the clock's resolution
			if n := sweepConcurrently(t, sweepers); n != 0 {
				t.Fatalf("%d tickets a microsecond before claim_timeout", n)
			}
			e.Clock.Advance(time.Microsecond)
			if !e.Service.Now().Equal(deadline) {
				t.Fatalf("now %v, want exactly the claim deadline %v", e.Service.Now(), deadline)
			}
			// The deadline itself is due.
			if n := sweepConcurrently(t, sweepers); n != 1 {
				t.Fatalf("concurrent sweeps opened %d tickets, want 1", n)
			}
			e.Clock.Advance(time.Hour)
			if n := sweepConcurrently(t, sweepers); n != 0 {
				t.Fatalf("a later sweep opened %d more tickets", n)
			}
			got, _ := e.Store.ActionGetByID(ctx, a.ID)
			if got.State != queue.StateInProgress || got.Ticket == nil || got.Ticket.Kind != queue.TicketStale || got.Ticket.State != queue.TicketOpen {
				t.Fatalf("after the sweep: %s ticket %+v", got.State, got.Ticket)
			}
			res, err := tc.report(e, a.ID)
			if err != nil || res.Action.State != tc.want {
				t.Fatalf("late report: %v %+v", err, res.Action)
			}
			tk := res.Action.Ticket
			if tk == nil || tk.State != queue.TicketResolved || apptest.Deref(tk.ResolvedBy) != "agent:bot" || tk.Outcome == nil || *tk.Outcome != tc.want {
				t.Fatalf("ticket after the late report: %+v", tk)
			}
			if n, _ := e.Store.TicketCountOpen(ctx); n != 0 {
				t.Fatalf("%d tickets still open", n)
			}
			// Resolving it now is refused; the action keeps the agent's outcome.
			if _, _, err := e.Service.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: tk.ID, By: "user:ops@example.com",
				Outcome: queue.StateDone, Note: "checked"}); queue.ErrorCode(err) != queue.CodeTicketResolved {
				t.Fatalf("resolving a resolved ticket: %v", err)
			}
		})
	}
}

// sweepConcurrently runs three sweeps on each process at once and returns
// how many tickets they opened in all.
func sweepConcurrently(t *testing.T, svcs []*maintenance.Sweeper) int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	start := make(chan struct{})
	for i := range 3 * len(svcs) {
		wg.Go(func() {
			<-start
			res, err := svcs[i%len(svcs)].Sweep(context.Background())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += len(res.Tickets)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return total
}

// An operator's finding moves a stale action to the outcome chosen; the
// timeline says who and why.
func TestResolveStaleTicket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, outcome := range []queue.State{queue.StateDone, queue.StateFailed} {
		t.Run(string(outcome), func(t *testing.T) {
			t.Parallel()
			e := apptest.DomainEnv(t, nil)
			a := e.Submit("issue_refund", map[string]any{"order_id": "o-9", "line_id": 2})
			e.Clock.Advance(3 * time.Minute)
			res, err := e.Sweeper().Sweep(ctx)
			if err != nil || len(res.Tickets) != 1 {
				t.Fatalf("sweep: %v %+v", err, res.Tickets)
			}
			if _, _, err := e.Service.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: res.Tickets[0].ID, By: "user:ops@example.com", Outcome: outcome}); queue.ErrorCode(err) != queue.CodeInvalidRequest {
				t.Fatalf("resolve without a note: %v", err)
			}
			got, tk, err := e.Service.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: res.Tickets[0].ID, By: "user:ops@example.com",
				Outcome: outcome, Note: "found no refund on the line"})
			if err != nil || got.State != outcome || tk.State != queue.TicketResolved || apptest.Deref(tk.Note) != "found no refund on the line" {
				t.Fatalf("resolve: %v %+v %+v", err, got, tk)
			}
			evs, _ := queue.Timeline(ctx, e.Store, a.ID)
			last := evs[len(evs)-1]
			if last.Kind != queue.EventTicketResolved || last.Actor != "user:ops@example.com" {
				t.Fatalf("last event %+v", last)
			}
			// The agent's late report now contradicts or replays it; it never changes it.
			if outcome == queue.StateFailed {
				if _, err := e.Service.Complete(ctx, a.ID, "bot", json.RawMessage(`{"refund":"re_9"}`), "api"); queue.ErrorCode(err) != queue.CodeOutcomeConflict {
					t.Fatalf("late complete after an operator failed it: %v", err)
				}
				if now, _ := e.Store.ActionGetByID(ctx, a.ID); now.State != queue.StateFailed {
					t.Fatalf("the stored outcome changed to %s", now.State)
				}
			}
		})
	}
}
