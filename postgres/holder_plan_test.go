package postgres_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/postgres/pgtest"
)

// TestHolderLookupsUseHeldIntentIndex explains the generic plan of every
// statement that looks for the holder of an intent key, as the batches run
// them (plan_cache_mode = force_generic_plan), and checks that the holder
// is read through actions_held_intent. The planner uses a partial index
// only when the statement's condition implies the index's whole predicate
// (the held states and class <> 'at-least-once'); a statement that missed a
// term would read the holder through another index of intent_key, or
// scan the table, on every submission. Sequential scans stay allowed and
// the table has no statistics, as in a new database before autovacuum's
// first ANALYZE: there a batch's holder joined to actions was planned as a
// scan of the whole table, and the connection's cached generic plan kept
// scanning as the table grew (submissions fell from 7,900/s to 2,900/s
// within seconds). The lateral probe (holderOf in sql/submit.sql) has
// nothing cheaper than the index.
func TestHolderLookupsUseHeldIntentIndex(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	param := regexp.MustCompile(`\$(\d+)`)
	for name, stmt := range postgres.HolderStatements {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tx, err := pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(t.Context()) }()
			for _, set := range []string{"SET LOCAL plan_cache_mode = force_generic_plan"} {
				if _, err := tx.Exec(t.Context(), set); err != nil {
					t.Fatal(err)
				}
			}
			// A prepared statement outlives the transaction: one name per
			// statement, released before the connection goes back.
			prepared := "holder_" + strings.ToLower(name)
			if _, err := tx.Exec(t.Context(), "PREPARE "+prepared+" AS "+stmt); err != nil {
				t.Fatal(err)
			}
			defer func() { _, _ = tx.Exec(t.Context(), "DEALLOCATE "+prepared) }()
			// A generic plan does not depend on the values: NULL for each.
			n := 0
			for _, m := range param.FindAllStringSubmatch(stmt, -1) {
				if i, _ := strconv.Atoi(m[1]); i > n {
					n = i
				}
			}
			nulls := strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")
			plan := explain(t, tx, "EXPLAIN EXECUTE "+prepared+"("+nulls+")")
			text := strings.Join(plan, "\n")
			if used := holderScans(plan); strings.Join(used, " ") != "actions_held_intent" {
				t.Fatalf("%s reads the holder with %q, want actions_held_intent only:\n%s", name, used, text)
			}
			t.Logf("%s:\n%s", name, text)
		})
	}
}

// holderScans returns how the plan of the CTE named holder reads actions:
// the name of each index it scans, or "Seq Scan".
func holderScans(plan []string) []string {
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	index := regexp.MustCompile(`(?:Scan using|Bitmap Index Scan on) (actions_\w+)`)
	var out []string
	for i, line := range plan {
		if strings.TrimSpace(line) != "CTE holder" {
			continue
		}
		for _, l := range plan[i+1:] {
			if indent(l) <= indent(line) {
				break
			}
			if m := index.FindStringSubmatch(l); m != nil {
				out = append(out, m[1])
			} else if strings.Contains(l, "Seq Scan on actions") {
				out = append(out, "Seq Scan")
			}
		}
	}
	return out
}
