package postgres_test

import (
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
