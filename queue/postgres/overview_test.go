package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/queue/postgres"
	"github.com/approvals/approvals/queue/postgres/pgtest"
)

// TestOverviewUsesIndexes runs EXPLAIN on every overview statement with
// sequential scans priced out (enable_seqscan off): a statement that still
// scans actions sequentially has no index that can serve it, and at a
// million actions would read the whole table on every page view.
func TestOverviewUsesIndexes(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	until := time.Date(2031, 3, 22, 9, 0, 0, 0, time.UTC)
	since := until.Add(-7 * 24 * time.Hour)
	for name, stmt := range postgres.OverviewStatements {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tx, err := pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(t.Context()) }()
			if _, err := tx.Exec(t.Context(), "SET LOCAL enable_seqscan = off"); err != nil {
				t.Fatal(err)
			}
			var args []any
			if strings.Contains(stmt, "$1") {
				args = []any{since, until}
			}
			rows, err := tx.Query(t.Context(), "EXPLAIN "+stmt, args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, "\n")
			if strings.Contains(text, "Seq Scan on actions") || !strings.Contains(text, "Index") {
				t.Fatalf("%s reads actions without an index:\n%s", name, text)
			}
			t.Logf("%s:\n%s", name, text)
		})
	}
}
