package verifier_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// awayStore answers the first `down` writes of a check as a database lost
// mid-failover does (the connection gone), then as the store itself.
type awayStore struct {
	queue.Store
	down atomic.Int32
}

func (s *awayStore) TicketCheckRecord(ctx context.Context, p queue.TicketCheckRecordParams) error {
	if s.down.Add(-1) >= 0 {
		return fmt.Errorf("record check: %w", io.ErrUnexpectedEOF)
	}
	return s.Store.TicketCheckRecord(ctx, p)
}

// A verdict learnt while the database does not answer is kept and written
// once it does (docs/operations.md, "Replication and failover"): the
// provider is asked once, the check is recorded once, and the refund it
// found finishes the action with the provider's record.
func TestVerdictKeptWhileTheDatabaseIsAway(t *testing.T) {
	t.Parallel()
	verifyEnv(t, func(t *testing.T, e *apptest.Env, p *provider) {
		a := staleRefund(t, e, "issue_refund", "found-kept")
		away := &awayStore{}
		away.down.Store(2)
		proc := e.AddWrappedProcess(func(st queue.Store) queue.Store { away.Store = st; return away })
		if _, err := proc.Service.Tickets().Verify(context.Background(), queue.VerifyRequest{ActionID: a.ID, By: "system"}); err == nil {
			t.Fatal("the check was answered as written while the database was away")
		}
		deadline := time.Now().Add(15 * time.Second)
		for get(t, e, a.ID).State != queue.StateDone {
			if time.Now().After(deadline) {
				t.Fatalf("the kept verdict was not written: action %s", get(t, e, a.ID).State)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := p.count("found-kept"); n != 1 {
			t.Errorf("the provider was asked %d times, want once", n)
		}
		if n := e.EventCount(a.ID, queue.EventVerified); n != 1 {
			t.Errorf("%d verified events, want 1", n)
		}
		if m := lastCheck(t, e, a.ID); m["verdict"] != "done" {
			t.Errorf("recorded verdict %v, want done", m["verdict"])
		}
	})
}
