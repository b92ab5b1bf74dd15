package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/approvals/approvals/queue"
)

// An undecided approval expires after expires_after; the sweep does it and
// a waiting long-poll sees it. Expiry releases the intent.
func TestPendingExpiresBySweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startEnvFrozen(t)
	other := e.addService() // the sweep runs in another process
	a := e.submit("send_customer_email", map[string]any{"customer_id": "c-1", "topic": "expiry"})
	if a.ExpiresAt == nil || !a.ExpiresAt.Equal(a.CreatedAt.Add(time.Hour)) {
		t.Fatalf("expires_at %v, want created_at + 1h", a.ExpiresAt)
	}

	waited := make(chan *queue.Action, 1)
	go func() {
		got, err := e.svc.Wait(ctx, a.ID, queue.StatePending, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		waited <- got
	}()

	e.clock.Advance(time.Hour - time.Microsecond) // the clock's resolution
	if res, err := other.Sweep(ctx); err != nil || len(res.Expired) != 0 {
		t.Fatalf("sweep a microsecond before expiry: %v %d expired", err, len(res.Expired))
	}
	e.clock.Advance(time.Microsecond)
	if !other.Now().Equal(*a.ExpiresAt) {
		t.Fatalf("now %v, want exactly expires_at %v", other.Now(), *a.ExpiresAt)
	}
	res, err := other.Sweep(ctx)
	if err != nil || len(res.Expired) != 1 || res.Expired[0].ID != a.ID {
		t.Fatalf("sweep at expiry: %v %+v", err, res.Expired)
	}
	select {
	case got := <-waited:
		if got.State != queue.StateExpired || deref(got.DecidedBy) != "system" || got.FinishedAt == nil {
			t.Fatalf("long-poll saw %s decided by %v", got.State, deref(got.DecidedBy))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not see the expiry")
	}
	if _, err := e.svc.Approve(ctx, queue.DecideRequest{ID: a.ID, By: "user:ann@example.com"}); queue.ErrorCode(err) != queue.CodeAlreadyDecided {
		t.Fatalf("approve after expiry: %v", err)
	}
	again := e.submit("send_customer_email", map[string]any{"customer_id": "c-1", "topic": "expiry"})
	if again.Attempt != 2 || again.State != queue.StatePending {
		t.Fatalf("resubmission: attempt %d %s, want 2 pending", again.Attempt, again.State)
	}
}

// After expires_at a decision cannot be given, whether or not the sweep has
// run: the refusal expires the action on the spot.
func TestDecisionAfterExpiryRefusedBeforeSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, verb := range []string{"approve", "reject"} {
		t.Run(verb, func(t *testing.T) {
			t.Parallel()
			e := startEnvFrozen(t)
			a := e.submit("send_customer_email", map[string]any{"customer_id": "c-2", "topic": verb})
			b := e.submit("send_customer_email", map[string]any{"customer_id": "c-2", "topic": verb + " in time"})
			if !b.ExpiresAt.Equal(*a.ExpiresAt) {
				t.Fatalf("expires_at %v and %v, want the same (frozen clock)", b.ExpiresAt, a.ExpiresAt)
			}
			decide := func(id, note string) (queue.DriveResult, error) {
				r := queue.DecideRequest{ID: id, By: "user:ann@example.com", Note: note}
				if verb == "approve" {
					return e.svc.Approve(ctx, r)
				}
				return e.svc.Reject(ctx, r)
			}
			e.clock.Advance(time.Hour - time.Microsecond) // the clock's resolution
			inTime := map[string]queue.State{"approve": queue.StateApproved, "reject": queue.StateRejected}[verb]
			if res, err := decide(b.ID, "just in time"); err != nil || res.Action.State != inTime {
				t.Fatalf("%s a microsecond before expires_at: %v %+v", verb, err, res.Action)
			}
			e.clock.Advance(time.Microsecond)
			if !e.svc.Now().Equal(*a.ExpiresAt) {
				t.Fatalf("now %v, want exactly expires_at %v", e.svc.Now(), *a.ExpiresAt)
			}
			// expires_at itself: no longer before it.
			_, err := decide(a.ID, "too late")
			var qe *queue.Error
			if queue.ErrorCode(err) != queue.CodeAlreadyDecided || !errors.As(err, &qe) || qe.Action == nil || qe.Action.State != queue.StateExpired {
				t.Fatalf("%s after expires_at: %v", verb, err)
			}
			got, _ := e.svc.Get(ctx, a.ID)
			if got.State != queue.StateExpired || deref(got.DecidedBy) != "system" || got.ApprovedPayload != nil {
				t.Fatalf("stored: %s by %v approved %s", got.State, deref(got.DecidedBy), got.ApprovedPayload)
			}
		})
	}
}

// An approved action not executed within expires_after of its approval
// expires too, keeping who approved it; execute refuses it even before the
// sweep.
func TestApprovedNotExecutedExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, swept := range []bool{true, false} {
		name := "by the sweep"
		if !swept {
			name = "on execute, before the sweep"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startEnvFrozen(t)
			a := e.submit("send_customer_email", map[string]any{"customer_id": "c-3", "topic": name})
			e.clock.Advance(50 * time.Minute)
			approved := e.approve(e.svc, a.ID)
			if !approved.ExpiresAt.Equal(approved.DecidedAt.Add(time.Hour)) {
				t.Fatalf("expires_at %v, want the approval time %v + 1h", approved.ExpiresAt, approved.DecidedAt)
			}
			// Past the submission's first expiry, within the approval's.
			e.clock.Advance(30 * time.Minute)
			if res, err := e.svc.Sweep(ctx); err != nil || len(res.Expired) != 0 {
				t.Fatalf("sweep within the approval's expiry: %v %d", err, len(res.Expired))
			}
			e.clock.Advance(30*time.Minute - time.Microsecond) // the clock's resolution
			if res, err := e.svc.Sweep(ctx); err != nil || len(res.Expired) != 0 {
				t.Fatalf("sweep a microsecond before the approval's expiry: %v %d", err, len(res.Expired))
			}
			e.clock.Advance(time.Microsecond)
			if !e.svc.Now().Equal(*approved.ExpiresAt) {
				t.Fatalf("now %v, want exactly expires_at %v", e.svc.Now(), *approved.ExpiresAt)
			}
			if swept {
				res, err := e.svc.Sweep(ctx)
				if err != nil || len(res.Expired) != 1 {
					t.Fatalf("sweep: %v %d expired", err, len(res.Expired))
				}
			}
			if _, err := e.svc.Execute(ctx, a.ID, "bot", "api"); queue.ErrorCode(err) != queue.CodeInvalidTransition {
				t.Fatalf("execute after expiry: %v", err)
			}
			got, _ := e.svc.Get(ctx, a.ID)
			if got.State != queue.StateExpired || deref(got.DecidedBy) != "user:ann@example.com" || got.ClaimedAt != nil {
				t.Fatalf("stored: %s decided by %v claimed %v; want expired, still decided by the approver", got.State, deref(got.DecidedBy), got.ClaimedAt)
			}
			if n := e.eventCount(a.ID, queue.EventExpired); n != 1 {
				t.Fatalf("%d expired events", n)
			}
		})
	}
}
