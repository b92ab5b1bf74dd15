package postgres_test

import (
	"strings"
	"testing"

	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/queue"
)

// TestIntentPrefixSearchReadsTheAttempts runs EXPLAIN on the search by
// intent key prefix, and on the list by key, over a table of many actions
// of each class, with sequential scans priced out: each reads the unique index of attempts (the
// keys of every class but at-least-once, in text_pattern_ops order) and
// actions_intent_prefix_recorded (the at-least-once keys), the two indexes
// that replaced actions_intent_prefix (migration 00030), and no other.
func TestIntentPrefixSearchReadsTheAttempts(t *testing.T) {
	t.Parallel()
	tx := planTx(t, `INSERT INTO actions (id, tool, class, intent_key, attempt, state,
		payload, requested_by, created_at, spec)
		SELECT gen_random_uuid(), 'plan_tool', c.class, c.prefix || g, 1, c.state, '{}',
			'agent:plan', now() - g * interval '1 second', '{"name": "plan_tool"}'
		FROM generate_series(1, 3000) g,
			(VALUES ('at-most-once', 'pending', 'email:'), ('at-least-once', 'recorded', 'cache:')) c(class, state, prefix)`,
		"ANALYZE actions", "SET LOCAL enable_seqscan = off")
	for _, c := range []struct {
		name string
		p    queue.ActionListParams
		n    int
	}{
		// email:29, email:290 to email:299, email:2900 to email:2999
		{"by prefix", queue.ActionListParams{IntentKeyPrefix: "email:29", Limit: 200}, 111},
		{"by key", queue.ActionListParams{IntentKey: "cache:29", Limit: 200}, 1},
	} {
		sql, args := postgres.ActionListSQL(c.p)
		text := strings.Join(explain(t, tx, "EXPLAIN "+sql, args...), "\n")
		for _, want := range []string{"actions_intent_attempt", "actions_intent_prefix_recorded"} {
			if !strings.Contains(text, want) {
				t.Errorf("the search %s does not read %s:\n%s", c.name, want, text)
			}
		}
		for _, not := range []string{"actions_created", "actions_tool_created", "Seq Scan on actions"} {
			if strings.Contains(text, not) {
				t.Errorf("the search %s reads %s:\n%s", c.name, not, text)
			}
		}
		if n := countRows(t, tx, sql, args...); n != c.n {
			t.Errorf("the search %s found %d actions, want %d", c.name, n, c.n)
		}
	}
}
