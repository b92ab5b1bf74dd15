package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/approvals/approvals/audit"
)

// BenchmarkSeal is the sealer's cost per event on SQLite: each op seals one
// round of 1,000 freshly committed staff events. The append goes through
// the store's one writer, which every submission shares, so what it writes
// per round is what submissions beside it wait for (issue 45).
func BenchmarkSeal(b *testing.B) {
	const round = 1000
	path := filepath.Join(b.TempDir(), "seal.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = raw.Close() })
	ctx := context.Background()
	p := audit.SealParams{Holder: "bench", Lease: time.Minute, Limit: round}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := raw.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO events (subject, kind, actor, channel, at, fanned_out)
			SELECT 'user:u' || i || '@example.com', 'signed_in', 'user:ann@example.com', 'dashboard', '2031-01-01T00:00:00.000000000Z', 1 FROM n`,
			round); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := audit.Seal(ctx, s, p)
		if err != nil || res.Sealed != round {
			b.Fatalf("sealed %d of %d: %v", res.Sealed, round, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*round)/1e3, "µs/event")
}
