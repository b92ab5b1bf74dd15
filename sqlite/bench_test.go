package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// BenchmarkWriters measures 50 concurrent writers, each submitting a claim
// and completing it, for two sync levels, with every write committed on its
// own (batch=1, the design before group commit) and with the writer's
// group commit (batch=64, what Open uses). It reports the wall time per
// write and the mean number of writes per commit.
func BenchmarkWriters(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, batch := range []int{1, defaultMaxBatch} {
			b.Run(fmt.Sprintf("sync=%s/batch=%d", sync, batch), func(b *testing.B) {
				benchWriters(b, config{maxBatch: batch, synchronous: sync})
			})
		}
	}
}

func benchWriters(b *testing.B, cfg config) {
	ctx := context.Background()
	s, err := open(ctx, filepath.Join(b.TempDir(), "bench.db"), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const goroutines = 50
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	var seq, failures atomic.Int64
	b.ResetTimer()
	for b.Loop() {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				<-start
				n := seq.Add(1)
				a := &queue.Action{ID: queue.NewID(now), Tool: "issue_refund", Class: classify.ExactlyOnce,
					IntentKey: fmt.Sprintf("bench:%d", n), State: queue.StateInProgress,
					Payload: json.RawMessage(`{"n":1}`), RequestedBy: "agent:bench", CreatedAt: now, ClaimedAt: &now,
					Spec: classify.Tool{Name: "issue_refund", Class: classify.ExactlyOnce, ClaimTimeout: time.Minute}}
				if _, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: queue.Event{Kind: queue.EventSubmitted, Actor: "agent:bench"}}); err != nil {
					failures.Add(1)
					b.Error(err)
					return
				}
				if _, err := s.ActionTransition(ctx, queue.ActionTransitionParams{ID: a.ID,
					From: []queue.State{queue.StateInProgress}, To: queue.StateDone, Now: now,
					Result: json.RawMessage(`{}`), FinishedAt: &now,
					Event: queue.Event{Kind: queue.EventCompleted, Actor: "agent:bench"}}); err != nil {
					failures.Add(1)
					b.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(seq.Load()*2), "µs/write")
	if st := s.BatchStats(); st.Batches > 0 {
		b.ReportMetric(float64(st.Calls)/float64(st.Batches), "writes/commit")
	}
	if failures.Load() > 0 {
		b.Fatalf("%d failed writes", failures.Load())
	}
}
