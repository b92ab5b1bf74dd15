package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/queue"
)

// A change made while the listener's connection was down is never heard;
// the store wakes every long-poll once it listens again, so a long-poll
// answers at once instead of at its recheck (a minute here).
func TestLongPollWokenAfterTheListenerReconnects(t *testing.T) {
	t.Parallel()
	e := apptest.NewEnv(t, apptest.EnvOptions{})
	ctx := t.Context()
	a := e.Submit("send_customer_email", map[string]any{"customer_id": "c-1", "topic": "listen", "to": "a@example.com", "subject": "s", "body": "b"})
	type result struct {
		a   *queue.Action
		err error
	}
	got := make(chan result, 1)
	go func() {
		w, err := e.Polls.Wait(ctx, a.ID, "", 30*time.Second)
		got <- result{w, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); e.Polls.Waiters() < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the long-poll never waited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// End the listener's connection; the store reconnects after 100ms, and
	// the approval commits in between, so its notification is lost.
	var killed int
	pool := e.Store.(*postgres.Store).Pool()
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		  AND query = 'LISTEN "approvals_changes_' || current_schema() || '"'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listeners (%v), want 1", killed, err)
	}
	if _, err := e.Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || r.a.State != queue.StateApproved {
			t.Fatalf("the long-poll answered %v, %v; want approved", r.a, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll was not woken after the listener reconnected")
	}
}

// Every kind of move wakes a long-poll in another process at once (its
// recheck is a minute here), and the mover's own subscribers hear it
// exactly once.
func TestMovesWakeTheOtherProcesses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mover := apptest.DomainEnv(t, nil)
	waiter := mover.AddProcess()
	own := mover.Store.Subscribe()
	defer own.Cancel()

	// heard waits for the other process's long-poll on id to see want,
	// then counts the mover's own changes of id (after a moment, so a
	// second, echoed one would have arrived).
	heard := func(t *testing.T, id string, from, want queue.State, move func() error) {
		t.Helper()
		type result struct {
			a   *queue.Action
			err error
		}
		got := make(chan result, 1)
		go func() {
			a, err := waiter.Polls.Wait(t.Context(), id, from, 30*time.Second)
			got <- result{a, err}
		}()
		apptest.AwaitWaiters(t, waiter.Polls, 1)
		if err := move(); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if r.err != nil || r.a.State != want {
				t.Fatalf("the other process's long-poll saw %+v, %v; want %s", r.a, r.err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the other process's long-poll was not woken by the move to %s", want)
		}
		time.Sleep(300 * time.Millisecond)
		var n int
		for drained := false; !drained; {
			select {
			case c := <-own.Changes:
				if c.ActionID == id {
					n++
					if c.State != want {
						t.Errorf("the mover heard %s, want %s", c.State, want)
					}
				}
			default:
				drained = true
			}
		}
		if n != 1 {
			t.Fatalf("the mover's own subscribers heard the move to %s %d times, want once", want, n)
		}
	}

	t.Run("decision", func(t *testing.T) {
		a := mover.Submit("send_customer_email", map[string]any{"customer_id": "c-1", "topic": "decide"})
		heard(t, a.ID, queue.StatePending, queue.StateApproved, func() error {
			_, err := mover.Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: apptest.Approver})
			return err
		})
	})
	t.Run("completion", func(t *testing.T) {
		a := mover.Submit("issue_refund", map[string]any{"order_id": "o-1", "line_id": 1})
		heard(t, a.ID, queue.StateInProgress, queue.StateDone, func() error {
			_, err := mover.Service.Complete(ctx, a.ID, "bot", json.RawMessage(`{"refund":"re_1"}`), "api")
			return err
		})
	})
	t.Run("ticket resolution", func(t *testing.T) {
		a := mover.Submit("issue_refund", map[string]any{"order_id": "o-2", "line_id": 1})
		mover.Clock.Advance(3 * time.Minute)
		res, err := mover.Sweeper().Sweep(ctx)
		if err != nil || len(res.Tickets) != 1 {
			t.Fatalf("sweep: %v %+v", err, res.Tickets)
		}
		heard(t, a.ID, queue.StateInProgress, queue.StateFailed, func() error {
			_, _, err := mover.Service.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: res.Tickets[0].ID,
				By: "user:ops@example.com", Outcome: queue.StateFailed, Note: "no refund on the line"})
			return err
		})
	})
	t.Run("expiry", func(t *testing.T) {
		a := mover.Submit("send_customer_email", map[string]any{"customer_id": "c-2", "topic": "expire"})
		mover.Clock.Advance(time.Hour)
		heard(t, a.ID, queue.StatePending, queue.StateExpired, func() error {
			// The approval of the first case expires too.
			res, err := mover.Sweeper().Sweep(context.Background())
			if err == nil && !slices.ContainsFunc(res.Expired, func(x *queue.Action) bool { return x.ID == a.ID }) {
				t.Errorf("the sweep expired %d actions, not %s", len(res.Expired), a.ID)
			}
			return err
		})
	})
}
