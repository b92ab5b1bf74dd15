package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/postgres/pgtest"
)

// TestOverviewUsesIndexes runs EXPLAIN on every overview statement with
// sequential scans priced out (enable_seqscan off) and checks that each
// scan of actions is of the index meant for it, bounded by the window:
// a sequential scan, or a full scan of some other index, would read all
// of a million actions on every page view.
var overviewIndexes = map[string][]string{
	"pending by tool":    {"actions_pending_tool"},
	"decision count":     {"actions_decided"},
	"decision times":     {"actions_decided"},
	"hourly":             {"actions_created", "actions_decided"},
	"ticket resolutions": {"tickets_resolved"},
}

func TestOverviewUsesIndexes(t *testing.T) {
	if len(overviewIndexes) != len(postgres.OverviewStatements) {
		t.Fatal("every overview statement needs its expected indexes")
	}
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
			plan := explain(t, tx, "EXPLAIN "+stmt, args...)
			text := strings.Join(plan, "\n")
			var used []string
			for _, line := range plan {
				if strings.Contains(line, "Seq Scan on actions") {
					t.Fatalf("%s scans actions sequentially:\n%s", name, text)
				}
				if _, after, ok := strings.Cut(line, " Scan using "); ok {
					used = append(used, strings.Fields(after)[0])
				} else if _, after, ok := strings.Cut(line, "Bitmap Index Scan on "); ok {
					used = append(used, strings.Fields(after)[0])
				}
			}
			if strings.Join(used, " ") != strings.Join(overviewIndexes[name], " ") {
				t.Fatalf("%s scans %q, want %q:\n%s", name, used, overviewIndexes[name], text)
			}
			t.Logf("%s:\n%s", name, text)
		})
	}
}
