package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// TestRoutingDueUsesRuleIndexes runs EXPLAIN on the sweep's reminder and
// escalation scans with sequential scans priced out and checks that they
// read the partial index of pending actions that have such a rule: every
// sweep runs them, and without it each read every pending action and
// parsed its tool snapshot.
func TestRoutingDueUsesRuleIndexes(t *testing.T) {
	t.Parallel()
	want := map[string]string{"remind": "actions_remind_rule", "escalate": "actions_escalate_rule"}
	pool := pgtest.Open(t).Pool()
	for name, stmt := range postgres.RoutingDueStatements {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tx, err := pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(t.Context()) }()
			// Statistics of a queue with pending actions and no rules: on an
			// empty table without them every index over pending rows
			// costs the same, and the planner's pick among them says
			// nothing about a real table (actions_state_listed also holds
			// the pending rows in created_at order: migration 00023).
			if _, err := tx.Exec(t.Context(), `INSERT INTO actions (id, tool, class, intent_key, attempt, state,
				payload, requested_by, created_at, spec)
				SELECT gen_random_uuid(), 'plan_tool', 'at-most-once', 'plan:' || g, 1, 'pending', '{}',
					'agent:plan', now() - g * interval '1 second', '{"name": "plan_tool"}'
				FROM generate_series(1, 2000) g`); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(t.Context(), "ANALYZE actions"); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(t.Context(), "SET LOCAL enable_seqscan = off"); err != nil {
				t.Fatal(err)
			}
			now := time.Date(2031, 3, 22, 9, 0, 0, 0, time.UTC)
			ev := queue.SystemEvent(name, now) // the event's values do not change the plan
			plan := explain(t, tx, "EXPLAIN "+stmt, now, 500, ev.Kind, ev.Actor, ev.Channel, ev.At, nil)
			text := strings.Join(plan, "\n")
			if strings.Contains(text, "Seq Scan on actions") || !strings.Contains(text, want[name]) {
				t.Fatalf("%s does not read %s:\n%s", name, want[name], text)
			}
		})
	}
}

// planTx opens a transaction on a fresh schema, rolled back when the test
// ends, and runs each statement of setup in it: the rows a plan is to be
// read against, ANALYZE, the planner's settings.
func planTx(t *testing.T, setup ...string) pgx.Tx {
	t.Helper()
	tx, err := pgtest.Open(t).Pool().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	for _, stmt := range setup {
		if _, err := tx.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return tx
}

// countRows runs sql in tx and counts the rows it answers.
func countRows(t *testing.T, tx pgx.Tx, sql string, args ...any) int {
	t.Helper()
	rows, err := tx.Query(t.Context(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// explain runs an EXPLAIN statement in tx and returns its plan's lines.
func explain(t *testing.T, tx pgx.Tx, sql string, args ...any) []string {
	t.Helper()
	rows, err := tx.Query(t.Context(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return plan
}
