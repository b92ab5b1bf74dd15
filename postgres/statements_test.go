package postgres

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/migrations"
	"github.com/approvals/approvals/queue"
)

var update = flag.Bool("update", false, "rewrite the golden files of the statement builders in testdata")

// The statements that vary with their parameters are built in Go; these
// golden files show a reader every variant whole, and a change to a
// builder shows up in review as a change to them. Run
// `go test ./postgres -run TestBuilders -update` after changing one on
// purpose. Whether the statements run correctly is the conformance suite's
// business (storetest).
func TestBuildersGolden(t *testing.T) {
	t.Parallel()
	id := "01890a5d-ac96-774b-bcce-b302099a8057"
	now := time.Date(2031, time.March, 14, 9, 26, 53, 0, time.UTC)
	by, note := "user:ann@example.com", "looks right"
	type variant struct {
		name string
		sql  string
		args []any
	}
	// build(name)(sql, args) names a builder's result.
	build := func(name string) func(string, []any) variant {
		return func(sql string, args []any) variant { return variant{name, sql, args} }
	}
	files := []struct {
		file     string
		variants []variant
	}{
		{"action_list.golden", []variant{
			build("no filter (newest first, default limit)")(actionListSQL(queue.ActionListParams{})),
			build("every filter, oldest first, after a cursor")(actionListSQL(queue.ActionListParams{
				IDs: []string{id, "not-a-uuid"}, IntentKey: "refund:1", IntentKeyPrefix: "refund:%_", State: queue.StatePending,
				Tool: "issue_refund", ServerExecuted: true, Held: true, GrantID: id, Oldest: true, Limit: 10,
				After: &queue.Cursor{CreatedAt: now, ID: id}})),
			build("page after a cursor, newest first")(actionListSQL(queue.ActionListParams{State: queue.StateApproved,
				After: &queue.Cursor{CreatedAt: now, ID: id}, Limit: 20})),
		}},
		{"action_transition.golden", []variant{
			build("approve")(actionTransitionSQL(queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StatePending},
				To: queue.StateApproved, Now: now, Unexpired: true, DecidedBy: &by, DecidedAt: &now, DecisionNote: &note,
				ApprovedPayload: json.RawMessage(`{"amount":10}`), ExpiresAt: &now,
				Event: queue.Event{Kind: queue.EventApproved, Actor: by, Channel: "dashboard"}})),
			build("agent executes its own approved action")(actionTransitionSQL(queue.ActionTransitionParams{ID: id,
				From: []queue.State{queue.StateApproved}, To: queue.StateInProgress, Now: now, RequestedBy: "agent:a",
				AgentExecuted: true, Unexpired: true, ClaimedAt: &now, ClaimedBy: &by, ClaimDeadline: &now,
				Event: queue.Event{Kind: queue.EventClaimed, Actor: "agent:a", Channel: "api"}})),
			build("late complete resolving the stale ticket")(actionTransitionSQL(queue.ActionTransitionParams{ID: id,
				From: []queue.State{queue.StateInProgress}, To: queue.StateDone, Now: now, Result: json.RawMessage(`{"ok":true}`),
				FinishedAt: &now, ResolveStale: queue.LateResolution(queue.Event{Actor: "agent:a", Channel: "mcp", At: now}, queue.StateDone, queue.LateReportNote),
				Event: queue.Event{Kind: queue.EventCompleted, Actor: "agent:a", Channel: "mcp", Data: json.RawMessage(`{"ok":true}`)}})),
			build("agent completes, its token checked in the statement")(actionTransitionSQL(queue.ActionTransitionParams{ID: id,
				From: []queue.State{queue.StateInProgress}, To: queue.StateDone, Now: now, Result: json.RawMessage(`{"ok":true}`),
				FinishedAt: &now, RequestedBy: "agent:a", AgentExecuted: true,
				ResolveStale: queue.LateResolution(queue.Event{Actor: "agent:a", Channel: "api", At: now}, queue.StateDone, queue.LateReportNote),
				TokenHash:    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
				Event:        queue.Event{Kind: queue.EventCompleted, Actor: "agent:a", Channel: "api", Data: json.RawMessage(`{"ok":true}`)}})),
			build("fail")(actionTransitionSQL(queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StateInProgress},
				To: queue.StateFailed, Now: now, Error: &note, FinishedAt: &now,
				Event: queue.Event{Kind: queue.EventFailed, Actor: "agent:a"}})),
		}},
		{"ticket_list.golden", []variant{
			build("no filter")(ticketListSQL(queue.TicketListParams{})),
			build("open tickets of one action")(ticketListSQL(queue.TicketListParams{State: queue.TicketOpen, ActionID: id, Limit: 5})),
		}},
		{"event_list.golden", []variant{
			build("no filter")(eventListSQL(queue.EventListParams{})),
			build("every filter")(eventListSQL(queue.EventListParams{ActionID: id, Kind: queue.EventApproved, Actor: by,
				BeforeID: 42, Limit: 10})),
		}},
	}
	for _, f := range files {
		var b bytes.Buffer
		for _, v := range f.variants {
			fmt.Fprintf(&b, "-- %s\n%s;\n", v.name, strings.TrimSpace(v.sql))
			for i, a := range v.args {
				fmt.Fprintf(&b, "-- $%d = %s\n", i+1, showArg(a))
			}
			b.WriteString("\n")
		}
		path := filepath.Join("testdata", f.file)
		if *update {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to write it)", err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s: the builders' statements changed; if on purpose, run with -update and review the diff.\ngot:\n%s", path, b.Bytes())
		}
	}
}

// showArg prints an argument as the statement receives it.
func showArg(a any) string {
	switch v := a.(type) {
	case time.Time:
		return v.Format(time.RFC3339)
	case *time.Time:
		return v.Format(time.RFC3339)
	case nil:
		return "NULL"
	case string:
		return fmt.Sprintf("%q", v)
	default:
		return fmt.Sprintf("%v", v)
	}
}

// The replay lookup for one submission is the batch's statement without the
// index column; written out twice, they must not drift apart.
func TestReplayLookupStatementsAgree(t *testing.T) {
	t.Parallel()
	one := strings.Replace(replayLookupManySQL, "SELECT h.n::int - 1, h.id::text", "SELECT h.id::text", 1)
	if one != replayLookupOneSQL {
		t.Fatalf("replayLookupOneSQL is not replayLookupManySQL without the index column:\n%s\nwant:\n%s", replayLookupOneSQL, one)
	}
}

// Every statement that looks for an intent's holder names the held states
// as queue.HeldStates has them (sqlgen writes them in from queue, so a
// change there that was not generated fails here), and the class that
// holds nothing, and so does the predicate of the partial unique index
// that guards the intent (as the last migration that creates it says): the
// planner uses the index for these statements only when their condition
// implies its predicate (TestHolderLookupsUseHeldIntentIndex checks the
// plans).
func TestHeldStatesWrittenIn(t *testing.T) {
	t.Parallel()
	quoted := make([]string, len(queue.HeldStates))
	for i, st := range queue.HeldStates {
		quoted[i] = "'" + string(st) + "'"
	}
	want := "state IN (" + strings.Join(quoted, ", ") + ") AND class <> 'at-least-once'"
	files, err := fs.Glob(migrations.Postgres(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var index string
	for _, f := range files {
		b, err := fs.ReadFile(migrations.Postgres(), f)
		if err != nil {
			t.Fatal(err)
		}
		up, _, _ := strings.Cut(string(b), "-- +goose Down")
		if _, def, ok := strings.Cut(up, "CREATE UNIQUE INDEX actions_held_intent ON actions (intent_key)"); ok {
			index, _, _ = strings.Cut(def, ";")
		}
	}
	if strings.TrimSpace(index) != "WHERE "+want {
		t.Errorf("the predicate of actions_held_intent is %q, want %q (queue.HeldStates and the class)", strings.TrimSpace(index), "WHERE "+want)
	}
	for name, stmt := range map[string]string{"submitSQL": submitSQL, "submitManySQL": submitManySQL,
		"replayLookupOneSQL": replayLookupOneSQL, "replayLookupManySQL": replayLookupManySQL} {
		if !strings.Contains(stmt, "a."+strings.Replace(want, "class", "a.class", 1)) {
			t.Errorf("%s does not name the holder as the index does:\n%s", name, stmt)
		}
	}
}
