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
// and completing it, for several write-pool sizes and sync levels. It is
// how writeConns and synchronous=FULL were chosen.
func BenchmarkWriters(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, writers := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("sync=%s/writers=%d", sync, writers), func(b *testing.B) {
				benchWriters(b, config{writers: writers, synchronous: sync})
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
				if _, _, _, err := s.ActionSubmit(ctx, a, queue.Event{Kind: queue.EventSubmitted, Actor: "agent:bench"}); err != nil {
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
	if failures.Load() > 0 {
		b.Fatalf("%d failed writes", failures.Load())
	}
}
