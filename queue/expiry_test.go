package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// An undecided approval expires after expires_after; the sweep does it and
// a waiting long-poll sees it. Expiry releases the intent.
func TestPendingExpiresBySweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := apptest.DomainEnv(t, testclock.Frozen())
	other := e.AddProcess() // the sweep runs in another process
	a := e.Submit("send_customer_email", map[string]any{"customer_id": "c-1", "topic": "expiry"})
	if a.ExpiresAt == nil || !a.ExpiresAt.Equal(a.CreatedAt.Add(time.Hour)) {
		t.Fatalf("expires_at %v, want created_at + 1h", a.ExpiresAt)
	}

	waited := make(chan *queue.Action, 1)
	go func() {
		got, err := e.Polls.Wait(ctx, a.ID, queue.StatePending, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		waited <- got
	}()
	apptest.AwaitWaiters(t, e.Polls, 1)

	e.Clock.Advance(time.Hour - time.Microsecond) // the clock's resolution
	if res, err := other.Sweeper().Sweep(ctx); err != nil || len(res.Expired) != 0 {
		t.Fatalf("sweep a microsecond before expiry: %v %d expired", err, len(res.Expired))
	}
	e.Clock.Advance(time.Microsecond)
	if !other.Service.Now().Equal(*a.ExpiresAt) {
		t.Fatalf("now %v, want exactly expires_at %v", other.Service.Now(), *a.ExpiresAt)
	}
	res, err := other.Sweeper().Sweep(ctx)
	if err != nil || len(res.Expired) != 1 || res.Expired[0].ID != a.ID {
		t.Fatalf("sweep at expiry: %v %+v", err, res.Expired)
	}
	select {
	case got := <-waited:
		if got.State != queue.StateExpired || apptest.Deref(got.DecidedBy) != "system" || got.FinishedAt == nil {
			t.Fatalf("long-poll saw %s decided by %v", got.State, apptest.Deref(got.DecidedBy))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not see the expiry")
	}
	if _, err := e.Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); queue.ErrorCode(err) != queue.CodeAlreadyDecided {
		t.Fatalf("approve after expiry: %v", err)
	}
	again := e.Submit("send_customer_email", map[string]any{"customer_id": "c-1", "topic": "expiry"})
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
			e := apptest.DomainEnv(t, testclock.Frozen())
			a := e.Submit("send_customer_email", map[string]any{"customer_id": "c-2", "topic": verb})
			b := e.Submit("send_customer_email", map[string]any{"customer_id": "c-2", "topic": verb + " in time"})
			if !b.ExpiresAt.Equal(*a.ExpiresAt) {
				t.Fatalf("expires_at %v and %v, want the same (frozen clock)", b.ExpiresAt, a.ExpiresAt)
			}
			decide := func(id, note string) (queue.DriveResult, error) {
				r := queue.DecideRequest{ID: id, To: queue.StateRejected, By: "user:ann@example.com", Note: note}
				if verb == "approve" {
					r.To = queue.StateApproved
				}
				return e.Service.Decide(ctx, r)
			}
			e.Clock.Advance(time.Hour - time.Microsecond) // the clock's resolution
			inTime := map[string]queue.State{"approve": queue.StateApproved, "reject": queue.StateRejected}[verb]
			if res, err := decide(b.ID, "just in time"); err != nil || res.Action.State != inTime {
				t.Fatalf("%s a microsecond before expires_at: %v %+v", verb, err, res.Action)
			}
			e.Clock.Advance(time.Microsecond)
			if !e.Service.Now().Equal(*a.ExpiresAt) {
				t.Fatalf("now %v, want exactly expires_at %v", e.Service.Now(), *a.ExpiresAt)
			}
			// expires_at itself: no longer before it.
			_, err := decide(a.ID, "too late")
			var qe *queue.Error
			if queue.ErrorCode(err) != queue.CodeAlreadyDecided || !errors.As(err, &qe) || qe.Action == nil || qe.Action.State != queue.StateExpired {
				t.Fatalf("%s after expires_at: %v", verb, err)
			}
			got, _ := e.Store.ActionGetByID(ctx, a.ID)
			if got.State != queue.StateExpired || apptest.Deref(got.DecidedBy) != "system" || got.ApprovedPayload != nil {
				t.Fatalf("stored: %s by %v approved %s", got.State, apptest.Deref(got.DecidedBy), got.ApprovedPayload)
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
			e := apptest.DomainEnv(t, testclock.Frozen())
			a := e.Submit("send_customer_email", map[string]any{"customer_id": "c-3", "topic": name})
			e.Clock.Advance(50 * time.Minute)
			approved := apptest.Approve(e.T, e.Service, a.ID)
			if !approved.ExpiresAt.Equal(approved.DecidedAt.Add(time.Hour)) {
				t.Fatalf("expires_at %v, want the approval time %v + 1h", approved.ExpiresAt, approved.DecidedAt)
			}
			// Past the submission's first expiry, within the approval's.
			e.Clock.Advance(30 * time.Minute)
			if res, err := e.Sweeper().Sweep(ctx); err != nil || len(res.Expired) != 0 {
				t.Fatalf("sweep within the approval's expiry: %v %d", err, len(res.Expired))
			}
			e.Clock.Advance(30*time.Minute - time.Microsecond) // the clock's resolution
			if res, err := e.Sweeper().Sweep(ctx); err != nil || len(res.Expired) != 0 {
				t.Fatalf("sweep a microsecond before the approval's expiry: %v %d", err, len(res.Expired))
			}
			e.Clock.Advance(time.Microsecond)
			if !e.Service.Now().Equal(*approved.ExpiresAt) {
				t.Fatalf("now %v, want exactly expires_at %v", e.Service.Now(), *approved.ExpiresAt)
			}
			if swept {
				res, err := e.Sweeper().Sweep(ctx)
				if err != nil || len(res.Expired) != 1 {
					t.Fatalf("sweep: %v %d expired", err, len(res.Expired))
				}
			}
			if _, err := e.Service.Execute(ctx, a.ID, "bot", "api"); queue.ErrorCode(err) != queue.CodeInvalidTransition {
				t.Fatalf("execute after expiry: %v", err)
			}
			got, _ := e.Store.ActionGetByID(ctx, a.ID)
			if got.State != queue.StateExpired || apptest.Deref(got.DecidedBy) != "user:ann@example.com" || got.ClaimedAt != nil {
				t.Fatalf("stored: %s decided by %v claimed %v; want expired, still decided by the approver", got.State, apptest.Deref(got.DecidedBy), got.ClaimedAt)
			}
			if n := e.EventCount(a.ID, queue.EventExpired); n != 1 {
				t.Fatalf("%d expired events", n)
			}
		})
	}
}

// sweepAfterRefusal is a store whose first refused approval is followed,
// before the service can act on the refusal, by another process's sweep:
// the order in which an approval at expires_at loses the row twice.
type sweepAfterRefusal struct {
	queue.Store
	once  sync.Once
	sweep func()
}

func (s *sweepAfterRefusal) ActionDecide(ctx context.Context, p queue.ActionDecideParams) (queue.ActionDecideResult, error) {
	res, err := s.Store.ActionDecide(ctx, p)
	if p.To == queue.StateApproved && errors.Is(err, queue.ErrStateMismatch) {
		s.once.Do(s.sweep)
	}
	return res, err
}

// Approve at exactly expires_at, on a row the sweep of another process
// expires between the refused approval and the service's own expiry: the
// 409 carries the row as it now is (expired by the system), not the
// pending copy the approval read.
func TestApproveAtExpiresAtLosesToSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := apptest.DomainEnv(t, testclock.Frozen())
	sweeper := e.AddProcess().Sweeper()
	a := e.Submit("send_customer_email", map[string]any{"customer_id": "c-4", "topic": "lost twice"})
	e.Clock.Advance(time.Hour)
	swept := 0
	approver := e.AddWrappedProcess(func(st queue.Store) queue.Store {
		return &sweepAfterRefusal{Store: st, sweep: func() {
			res, err := sweeper.Sweep(ctx)
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			swept = len(res.Expired)
		}}
	}).Service
	if !approver.Now().Equal(*a.ExpiresAt) {
		t.Fatalf("now %v, want exactly expires_at %v", approver.Now(), *a.ExpiresAt)
	}
	_, err := approver.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"})
	if swept != 1 {
		t.Fatalf("the sweep between refusal and expiry expired %d actions, want 1", swept)
	}
	var qe *queue.Error
	if !errors.As(err, &qe) || qe.Code != queue.CodeAlreadyDecided || qe.Action == nil {
		t.Fatalf("approve: %v, want already_decided with the action", err)
	}
	if qe.Action.State != queue.StateExpired || apptest.Deref(qe.Action.DecidedBy) != "system" {
		t.Fatalf("the 409 carries %s decided by %v, want the current row: expired by system", qe.Action.State, apptest.Deref(qe.Action.DecidedBy))
	}
	if n := e.EventCount(a.ID, queue.EventExpired); n != 1 {
		t.Fatalf("%d expired events, want 1", n)
	}
}

// Approvers in several processes and a sweep, released at once at exactly
// expires_at: expires_at is no longer before it, so the action expires
// once, by the system, and every approval is refused with that row.
func TestApproveRacesSweepAtExpiresAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := apptest.DomainEnv(t, testclock.Frozen())
	a := e.Submit("send_customer_email", map[string]any{"customer_id": "c-5", "topic": "race"})
	const approvers = 8
	svcs := make([]*apptest.Env, approvers+1)
	for i := range svcs {
		svcs[i] = e.AddProcess()
	}
	e.Clock.Advance(time.Hour)
	if !e.Service.Now().Equal(*a.ExpiresAt) {
		t.Fatalf("now %v, want exactly expires_at %v", e.Service.Now(), *a.ExpiresAt)
	}
	start := make(chan struct{})
	errs := make([]error, approvers)
	var expired int
	var sweepErr error
	var wg sync.WaitGroup
	for i := range approvers {
		wg.Go(func() {
			<-start
			_, errs[i] = svcs[i].Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: fmt.Sprintf("user:a%d@example.com", i)})
		})
	}
	wg.Go(func() {
		<-start
		res, err := svcs[approvers].Sweeper().Sweep(ctx)
		expired, sweepErr = len(res.Expired), err
	})
	close(start)
	wg.Wait()
	if sweepErr != nil || expired > 1 {
		t.Fatalf("sweep: %v, %d expired", sweepErr, expired)
	}
	for i, err := range errs {
		var qe *queue.Error
		if !errors.As(err, &qe) || qe.Code != queue.CodeAlreadyDecided || qe.Action == nil ||
			qe.Action.State != queue.StateExpired || apptest.Deref(qe.Action.DecidedBy) != "system" {
			t.Errorf("approver %d: %v (action %+v), want already_decided carrying the expired row", i, err, qe)
		}
	}
	got, err := e.Store.ActionGetByID(ctx, a.ID)
	if err != nil || got.State != queue.StateExpired || got.ApprovedPayload != nil {
		t.Fatalf("stored: %v %+v", err, got)
	}
	if n := e.EventCount(a.ID, queue.EventExpired); n != 1 {
		t.Fatalf("%d expired events, want 1", n)
	}
	if n := e.EventCount(a.ID, queue.EventApproved); n != 0 {
		t.Fatalf("%d approved events, want 0", n)
	}
}
