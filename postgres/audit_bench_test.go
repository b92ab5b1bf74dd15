package postgres_test

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// BenchmarkSeal is the sealer's own cost per event: each op seals one
// round of 1,000 freshly committed submitted events (the new-submission
// load's events, each joined to its action). It reports the wall time and
// this process's CPU per event; the rest of the wall time is PostgreSQL's
// and the round trips (docs/performance.md, issue 27).
func BenchmarkSeal(b *testing.B) {
	const round = 1000
	st := pgtest.Open(b)
	ctx := context.Background()
	now := time.Now().UTC()
	a := &queue.Action{ID: queue.NewID(now), Tool: "send_email", Class: classify.AtMostOnce, IntentKey: "seed",
		Payload:     json.RawMessage(`{"to":"customer-1@example.com","subject":"Your refund","body":"Hello, your refund of 12.00 EUR is on its way."}`),
		RequestedBy: "agent:support", CreatedAt: now, Channel: "api", State: queue.StatePending,
		ExpiresAt: &now, Spec: classify.Tool{Name: "send_email", Class: classify.AtMostOnce, Registered: true}}
	if _, err := st.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: queue.Event{ActionID: a.ID,
		Kind: queue.EventSubmitted, Actor: a.RequestedBy, Channel: a.Channel, At: now}}); err != nil {
		b.Fatal(err)
	}
	p := audit.SealParams{Holder: "bench", Lease: time.Minute, Limit: round}
	if _, err := audit.Seal(ctx, st, p); err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		// 1,000 copies of the seed action, each with its submitted event.
		if _, err := st.Pool().Exec(ctx, `WITH n AS (
			INSERT INTO actions SELECT (jsonb_populate_record(a, jsonb_build_object('id', gen_random_uuid(),
				'intent_key', 'k-' || gen_random_uuid()))).* FROM actions a, generate_series(1, $2) WHERE a.id = $1
			RETURNING id, requested_by, channel, created_at)
			INSERT INTO events (action_id, kind, actor, channel, at) SELECT id, 'submitted', requested_by, channel, created_at FROM n`,
			a.ID, round); err != nil {
			b.Fatal(err)
		}
		before := rusage()
		b.StartTimer()
		res, err := audit.Seal(ctx, st, p)
		b.StopTimer()
		cpu += rusage() - before
		b.StartTimer()
		if err != nil || res.Sealed != round {
			b.Fatalf("sealed %d of %d: %v", res.Sealed, round, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*round)/1e3, "µs/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*round)/1e3, "server-µs/event")
}

func rusage() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
