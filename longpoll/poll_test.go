package longpoll_test

import (
	"context"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// In-process shutdown (longpoll.Options.Done) releases a waiting long-poll at once
// with the action as it is stored, not an error and not at its deadline.
func TestStopReleasesWaitWithCurrentState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := apptest.DomainEnv(t, testclock.Frozen())
	a := e.Submit("send_customer_email", map[string]any{"customer_id": "c-6", "topic": "shutdown"})
	apptest.Approve(e.T, e.Service, a.ID)
	other := e.AddProcess()
	polls := other.Polls
	type answer struct {
		a   *queue.Action
		err error
	}
	got := make(chan answer, 1)
	go func() {
		w, err := polls.Wait(ctx, a.ID, queue.StateApproved, 50*time.Second)
		got <- answer{w, err}
	}()
	apptest.AwaitWaiters(t, polls, 1)
	other.ReleaseWaits()
	select {
	case r := <-got:
		if r.err != nil || r.a == nil || r.a.State != queue.StateApproved || apptest.Deref(r.a.DecidedBy) != "user:ann@example.com" {
			t.Fatalf("released wait: %v %+v, want the approved action", r.err, r.a)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not release the waiting long-poll")
	}
	// A wait that begins after Stop answers at once too.
	if w, err := polls.Wait(ctx, a.ID, queue.StateApproved, 50*time.Second); err != nil || w.State != queue.StateApproved {
		t.Fatalf("wait after Stop: %v %+v", err, w)
	}
}
