package postgres_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/postgres/pgtest"
)

// TestUnderReviewProbeUsesIndexes explains the generic plans of the
// claiming statements and checks that the probe a conflict adds to every
// claim (underReview in sql/submit.sql: the key's latest attempt, then its
// open conflict ticket) reads the latest attempt backwards on
// actions_intent_attempt and the ticket on tickets_one_open, on a table
// without statistics as in a new database: anything else would be paid
// by every submission.
func TestUnderReviewProbeUsesIndexes(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	attempt := regexp.MustCompile(` on actions r(_\d+)? `)
	ticket := regexp.MustCompile(` on tickets rt(_\d+)? `)
	param := regexp.MustCompile(`\$(\d+)`)
	for _, name := range []string{"submitSQL", "submitManySQL"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tx, err := pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(t.Context()) }()
			if _, err := tx.Exec(t.Context(), "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
				t.Fatal(err)
			}
			stmt := postgres.HolderStatements[name]
			prepared := "review_" + strings.ToLower(name)
			if _, err := tx.Exec(t.Context(), "PREPARE "+prepared+" AS "+stmt); err != nil {
				t.Fatal(err)
			}
			defer func() { _, _ = tx.Exec(t.Context(), "DEALLOCATE "+prepared) }()
			params := 0
			for _, m := range param.FindAllStringSubmatch(stmt, -1) {
				n, _ := strconv.Atoi(m[1])
				params = max(params, n)
			}
			plan := explain(t, tx, "EXPLAIN EXECUTE "+prepared+"("+strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")+")")
			text := strings.Join(plan, "\n")
			var attempts, tickets int
			for _, l := range plan {
				switch {
				case attempt.MatchString(l):
					attempts++
					if !strings.Contains(l, "Index Scan Backward using actions_intent_attempt") {
						t.Errorf("%s reads the latest attempt with %q, want actions_intent_attempt backwards:\n%s", name, strings.TrimSpace(l), text)
					}
				case ticket.MatchString(l):
					tickets++
					if !strings.Contains(l, "using tickets_one_open") {
						t.Errorf("%s reads the open conflict ticket with %q, want tickets_one_open:\n%s", name, strings.TrimSpace(l), text)
					}
				}
			}
			if attempts == 0 || tickets == 0 {
				t.Fatalf("%s: no underReview probe in the plan (%d attempt and %d ticket scans):\n%s", name, attempts, tickets, text)
			}
		})
	}
}
