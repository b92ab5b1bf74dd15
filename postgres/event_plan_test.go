package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/queue"
)

// TestEventListByKindReadsItsIndex runs EXPLAIN on the list of events by
// kind, on a table of many submitted and completed events and a few of
// another kind, with sequential scans priced out: a kind that is few reads
// events_kind_listed (migration 00029), which only a literal kind lets the
// planner prove in a generic plan; a kind that is most rows is not in that
// index and reads the events from the newest.
func TestEventListByKindReadsItsIndex(t *testing.T) {
	t.Parallel()
	// The store's statements are prepared, and a prepared statement may run
	// a generic plan, made without its parameters' values: the plans are
	// checked as that.
	tx := planTx(t, `INSERT INTO events (action_id, kind, actor, channel, at)
		SELECT gen_random_uuid(), CASE WHEN g % 500 = 0 THEN 'ticket_opened' WHEN g % 2 = 0 THEN 'submitted' ELSE 'completed' END,
			'agent:plan', 'api', now() FROM generate_series(1, 5000) g`,
		"ANALYZE events", "SET LOCAL enable_seqscan = off", "SET LOCAL plan_cache_mode = force_generic_plan")
	for kind, want := range map[string]string{
		queue.EventTicketOpened: "events_kind_listed",
		queue.EventSubmitted:    "events_pkey",
	} {
		sql, args := postgres.EventListSQL(queue.EventListParams{Kind: kind, Limit: 50})
		name := "list_" + kind
		if _, err := tx.Exec(t.Context(), "PREPARE "+name+" AS "+sql); err != nil {
			t.Fatal(err)
		}
		values := make([]string, len(args))
		for i, a := range args {
			switch a := a.(type) {
			case string:
				values[i] = "'" + a + "'"
			default:
				values[i] = fmt.Sprint(a)
			}
		}
		text := strings.Join(explain(t, tx, "EXPLAIN EXECUTE "+name+"("+strings.Join(values, ", ")+")"), "\n")
		if !strings.Contains(text, want) {
			t.Errorf("a list of %s events does not read %s:\n%s", kind, want, text)
		}
	}
	// Their rows, through the store's own statement.
	sql, args := postgres.EventListSQL(queue.EventListParams{Kind: queue.EventTicketOpened, Limit: 50})
	if n := countRows(t, tx, sql, args...); n != 10 {
		t.Fatalf("the list of ticket_opened events has %d rows, want 10", n)
	}
}

// TestEventListKindLiteral: only a kind's letters and underscores are
// written into the statement; anything else stays a parameter.
func TestEventListKindLiteral(t *testing.T) {
	for kind, literal := range map[string]bool{
		"ticket_opened": true, "submitted": true,
		"": false, "x' OR true --": false, "Submitted": false, "kind-1": false,
		strings.Repeat("a", 65): false,
	} {
		sql, args := postgres.EventListSQL(queue.EventListParams{Kind: kind, Limit: 1})
		if kind == "" {
			if strings.Contains(sql, "WHERE") {
				t.Errorf("no kind: %s", sql)
			}
			continue
		}
		if got := strings.Contains(sql, "kind = '"+kind+"'"); got != literal {
			t.Errorf("kind %q written as a literal: %v, want %v\n%s", kind, got, literal, sql)
		}
		if !literal && (len(args) != 2 || args[0] != kind) {
			t.Errorf("kind %q is not the statement's first parameter: %v", kind, args)
		}
	}
}
