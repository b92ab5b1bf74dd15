package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"fmt"
	"time"

	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/migrations"
	"github.com/approvals/approvals/queue"
)

// The holder lookup reads actions_held_intent: SQLite uses a partial index
// only when every term of the index's WHERE appears in the query's, so a
// lookup without class <> 'at-least-once' would read actions_intent_prefix
// and filter the states row by row.
func TestHeldActionQueryUsesHeldIntentIndex(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, filepath.Join(t.TempDir(), "a.db"))
	rows, err := s.read.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+heldActionQuery, "refund:o-1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || !strings.Contains(plan[0], "USING INDEX actions_held_intent (intent_key=?)") {
		t.Fatalf("the holder lookup's plan is %q, want a search of actions_held_intent", plan)
	}
}

// schemaObject is one row of sqlite_master.
type schemaObject struct{ typ, table, sql string }

func readSchema(t *testing.T, db *sql.DB) map[string]schemaObject {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]schemaObject{}
	for rows.Next() {
		var name string
		var o schemaObject
		if err := rows.Scan(&o.typ, &name, &o.table, &o.sql); err != nil {
			t.Fatal(err)
		}
		out[name] = o
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// columns00012 are the columns of actions from migration 00003 to 00012.
const columns00012 = `id, tool, class, intent_key, attempt, state, payload, approved_payload, result, error,
	requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
	finished_at, expires_at, spec, warnings, approvals, escalated_at, claim_deadline, has_webhook, reminded_at`

// dumpActions lists every action row, every column of columns, in id order.
func dumpActions(t *testing.T, db *sql.DB, columns string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT json_array(`+columns+`)
		FROM actions ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Migration 00012 rebuilds actions to change a CHECK constraint. On a
// database at 00011 holding an at-least-once action recorded by an
// upstream call (with its result and error), Up keeps every row as it was
// and every index as it was, but for the new predicate of
// actions_held_intent and the two CHECKs that replace
// actions_recorded_iff_at_least_once; Down turns an at-least-once done
// back into recorded and leaves sqlite_master exactly as it was at 00011.
func TestMigrationAtLeastOnceOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1) // foreign keys stay off, as in migrate
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 11); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) error {
		_, err := db.ExecContext(ctx, q, args...)
		return err
	}
	const insert = `INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, result, error, requested_by,
		created_at, finished_at, claimed_at, claim_deadline, spec) VALUES (?, ?, ?, ?, 1, ?, '{"a":1}', ?, ?, 'agent:bot',
		'2031-03-14T09:00:00.000000000Z', '2031-03-14T09:00:01.000000000Z', ?, ?, '{"name":"t"}')`
	claimedAt, deadline := "2031-03-14T09:00:00.000000000Z", "2031-03-14T09:05:00.000000000Z"
	for _, r := range [][]any{
		{"01890a5d-0000-7000-8000-000000000001", "crm_lookup", "at-least-once", "lookup:c-1", "recorded",
			`{"content":[{"type":"text","text":"not found"}],"isError":true}`, "not found", nil, nil},
		{"01890a5d-0000-7000-8000-000000000002", "issue_refund", "exactly-once", "lookup:c-1", "done", `{"ok":true}`, nil, claimedAt, deadline},
	} {
		if err := exec(insert, r...); err != nil {
			t.Fatal(err)
		}
	}
	if err := exec(`INSERT INTO events (action_id, kind, actor, at) VALUES ('01890a5d-0000-7000-8000-000000000001', 'failed', 'dispatcher', '2031')`); err != nil {
		t.Fatal(err)
	}
	before, rowsBefore := readSchema(t, db), dumpActions(t, db, columns00012)

	if _, err := p.UpTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	after := readSchema(t, db)
	oldCheck := "    CONSTRAINT actions_recorded_iff_at_least_once CHECK ((class = 'at-least-once') = (state = 'recorded')),\n"
	newChecks := "    CONSTRAINT actions_recorded_only_at_least_once CHECK (state <> 'recorded' OR class = 'at-least-once'),\n" +
		"    CONSTRAINT actions_at_least_once_states CHECK (class <> 'at-least-once' OR state IN ('recorded', 'done', 'failed')),\n"
	changed := map[string]func(string) string{
		"actions": func(s string) string { return strings.Replace(s, oldCheck, newChecks, 1) },
		"actions_held_intent": func(s string) string {
			return strings.Replace(s, "'done')", "'done') AND class <> 'at-least-once'", 1)
		},
	}
	for name, o := range before {
		want := o
		if f := changed[name]; f != nil {
			want.sql = f(o.sql)
			if want.sql == o.sql {
				t.Fatalf("%s: the expected change does not apply to %q", name, o.sql)
			}
		}
		if after[name] != want {
			t.Errorf("after Up, %s is\n%+v\nwant\n%+v", name, after[name], want)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("Up left %s behind", name)
		}
	}
	if got := dumpActions(t, db, columns00012); strings.Join(got, "\n") != strings.Join(rowsBefore, "\n") {
		t.Errorf("Up changed the rows:\n%s\nwant\n%s", got, rowsBefore)
	}
	var broken int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&broken); err != nil || broken != 0 {
		t.Errorf("foreign key check after Up: %d broken, %v", broken, err)
	}

	// The new CHECKs: at-least-once may end done or failed, never anything
	// else; recorded stays that class's alone.
	if err := exec(`UPDATE actions SET state = 'done' WHERE id = '01890a5d-0000-7000-8000-000000000001'`); err != nil {
		t.Errorf("at-least-once done refused: %v", err)
	}
	for q, check := range map[string]string{
		`UPDATE actions SET state = 'in_progress', claimed_at = '` + claimedAt + `', claim_deadline = '` + deadline +
			`' WHERE id = '01890a5d-0000-7000-8000-000000000001'`: "actions_at_least_once_states",
		`UPDATE actions SET state = 'recorded' WHERE id = '01890a5d-0000-7000-8000-000000000002'`: "actions_recorded_only_at_least_once",
	} {
		if err := exec(q); err == nil || !strings.Contains(err.Error(), check) {
			t.Errorf("%s: %v, want refused by %s", q, err, check)
		}
	}

	if _, err := p.DownTo(ctx, 11); err != nil {
		t.Fatal(err)
	}
	down := readSchema(t, db)
	for name, o := range before {
		if down[name] != o {
			t.Errorf("after Down, %s is\n%+v\nwant\n%+v", name, down[name], o)
		}
	}
	if len(down) != len(before) {
		t.Errorf("after Down, %d schema objects, want %d", len(down), len(before))
	}
	if got := dumpActions(t, db, columns00012); strings.Join(got, "\n") != strings.Join(rowsBefore, "\n") {
		t.Errorf("Down did not bring the at-least-once done back to recorded:\n%s\nwant\n%s", got, rowsBefore)
	}

	// Up again, and the store opens on it and reads the old recording.
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	s := openTestStore(t, path)
	a, err := s.ActionGetByID(ctx, "01890a5d-0000-7000-8000-000000000001")
	if err != nil || a.State != queue.StateRecorded || a.Error == nil || *a.Error != "not found" {
		t.Fatalf("the old recording through the store: %+v, %v", a, err)
	}
}

// Migration 00013 rebuilds actions again (one CHECK, the column grant_id)
// and adds grants. On a database at 00012, Up keeps every row and every
// index; an exactly-once action may then be pending; Down ends it as
// cancelled and leaves sqlite_master exactly as it was at 00012.
func TestMigrationPoliciesAndGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1) // foreign keys stay off, as in migrate
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) error {
		_, err := db.ExecContext(ctx, q, args...)
		return err
	}
	if err := exec(`INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, expires_at, spec)
		VALUES ('01890a5d-0000-7000-8000-000000000001', 'send_customer_email', 'at-most-once', 'email:c-1:t', 1, 'pending', '{"a":1}',
		'agent:bot', '2031-03-14T09:00:00.000000000Z', '2031-03-17T09:00:00.000000000Z', '{"name":"send_customer_email"}')`); err != nil {
		t.Fatal(err)
	}
	if err := exec(`INSERT INTO events (action_id, kind, actor, at) VALUES ('01890a5d-0000-7000-8000-000000000001', 'submitted', 'agent:bot', '2031')`); err != nil {
		t.Fatal(err)
	}
	before, rowsBefore := readSchema(t, db), dumpActions(t, db, columns00012)
	if _, err := p.UpTo(ctx, 13); err != nil {
		t.Fatal(err)
	}
	after := readSchema(t, db)
	for name, o := range before {
		if name == "actions" {
			continue // its CHECK and its new column: below
		}
		if after[name] != o {
			t.Errorf("after Up, %s is\n%+v\nwant\n%+v", name, after[name], o)
		}
	}
	for _, name := range []string{"grants", "grants_active_tool", "grants_created", "actions_grant", "events_policy"} {
		if _, ok := after[name]; !ok {
			t.Errorf("Up made no %s", name)
		}
	}
	if got := dumpActions(t, db, columns00012); strings.Join(got, "\n") != strings.Join(rowsBefore, "\n") {
		t.Errorf("Up changed the rows:\n%s\nwant\n%s", got, rowsBefore)
	}
	var broken int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&broken); err != nil || broken != 0 {
		t.Errorf("foreign key check after Up: %d broken, %v", broken, err)
	}
	if err := exec(`INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, spec)
		VALUES ('01890a5d-0000-7000-8000-000000000002', 'issue_refund', 'exactly-once', 'refund:o-1:1', 1, 'pending', '{}', 'agent:bot',
		'2031-03-14T09:00:00.000000000Z', '{}')`); err != nil {
		t.Errorf("an exactly-once action pending: %v", err)
	}
	if err := exec(`INSERT INTO grants (id, tool, granted_by, action_id, created_at, expires_at, max_uses, uses)
		VALUES ('g', 'send_customer_email', 'user:ann@example.com', '01890a5d-0000-7000-8000-000000000001',
		'2031-03-14T09:00:00.000000000Z', '2031-03-14T10:00:00.000000000Z', 2, 3)`); err == nil || !strings.Contains(err.Error(), "grants_uses_within") {
		t.Errorf("a grant used beyond its limit: %v, want refused by grants_uses_within", err)
	}
	if _, err := p.DownTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	down := readSchema(t, db)
	for name, o := range before {
		if down[name] != o {
			t.Errorf("after Down, %s is\n%+v\nwant\n%+v", name, down[name], o)
		}
	}
	if len(down) != len(before) {
		t.Errorf("after Down, %d schema objects, want %d", len(down), len(before))
	}
	var state string
	if err := db.QueryRowContext(ctx, `SELECT state FROM actions WHERE id = '01890a5d-0000-7000-8000-000000000002'`).Scan(&state); err != nil || state != "cancelled" {
		t.Errorf("after Down the pending exactly-once action is %q (%v), want cancelled", state, err)
	}
}

// Migration 00014 rebuilds events so that a staff event may have no
// action. Up keeps every event, every index and the AUTOINCREMENT counter
// (an id once handed out, even of a deleted row, is never handed out
// again), and lets an event without an action in; Down removes those and
// leaves the schema as it was but for the rebuilt table's quoted name.
func TestMigrationSSO(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db, p, exec := migratedTo(t, 13)
	if err := exec(`INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, spec)
		VALUES ('01890a5d-0000-7000-8000-000000000001', 't', 'at-most-once', 'k:1', 1, 'pending', '{}', 'agent:bot',
		'2031-03-14T09:00:00.000000000Z', '{"name":"t"}')`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := exec(`INSERT INTO events (action_id, kind, actor, at, data, fanned_out) VALUES ('01890a5d-0000-7000-8000-000000000001', 'submitted', 'agent:bot', ?, ?, ?)`,
			"2031-03-14T09:00:0"+string(rune('0'+i))+".000000000Z", `{"n":`+string(rune('0'+i))+`}`, i%2); err != nil {
			t.Fatal(err)
		}
	}
	// The last id is deleted: the counter must still remember it.
	if err := exec(`DELETE FROM events WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	before, rowsBefore := readSchema(t, db), dumpEvents(t, db)

	if _, err := p.UpTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	after := readSchema(t, db)
	for _, name := range []string{"events_action", "events_kind", "events_fan_out", "users_email", "users_slack_id", "sessions_user"} {
		if after[name] != before[name] {
			t.Errorf("after Up, %s is\n%+v\nwant\n%+v", name, after[name], before[name])
		}
	}
	if !strings.Contains(after["events"].sql, "action_id  TEXT    REFERENCES actions (id),") {
		t.Errorf("events after Up: %s", after["events"].sql)
	}
	if got := dumpEvents(t, db); strings.Join(got, "\n") != strings.Join(rowsBefore, "\n") {
		t.Errorf("Up changed the events:\n%s\nwant\n%s", got, rowsBefore)
	}
	var broken int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&broken); err != nil || broken != 0 {
		t.Errorf("foreign key check after Up: %d broken, %v", broken, err)
	}
	if err := exec(`INSERT INTO events (action_id, kind, actor, at, fanned_out) VALUES (NULL, 'signed_in', 'user:ann@example.com', '2031', 1)`); err != nil {
		t.Fatalf("an event without an action after Up: %v", err)
	}
	var id int64
	if err := db.QueryRowContext(ctx, `SELECT max(id) FROM events`).Scan(&id); err != nil || id != 4 {
		t.Fatalf("the first id after Up is %d (%v), want 4: ids are never handed out twice", id, err)
	}
	// The new users columns have their checks.
	if err := exec(`INSERT INTO users (email, password_hash, role, created_at, password_changed_at, idp_groups) VALUES ('a@x', '', 'viewer', '1', '1', '{}')`); err == nil ||
		!strings.Contains(err.Error(), "users_idp_groups_array") {
		t.Errorf("idp_groups that are no array: %v, want refused by users_idp_groups_array", err)
	}

	if _, err := p.DownTo(ctx, 13); err != nil {
		t.Fatal(err)
	}
	down := readSchema(t, db)
	for name, o := range before {
		got := down[name]
		// The rename quotes the rebuilt table's name.
		got.sql = strings.Replace(got.sql, `CREATE TABLE "events"`, `CREATE TABLE events`, 1)
		if got != o {
			t.Errorf("after Down, %s is\n%+v\nwant\n%+v", name, got, o)
		}
	}
	if len(down) != len(before) {
		t.Errorf("after Down, %d schema objects, want %d", len(down), len(before))
	}
	if got := dumpEvents(t, db); strings.Join(got, "\n") != strings.Join(rowsBefore, "\n") {
		t.Errorf("Down did not leave the action's events alone:\n%s\nwant\n%s", got, rowsBefore)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
}

// migratedTo opens a new SQLite file migrated up to version, as migrate
// opens it (one connection, foreign keys off); exec runs a statement on it.
func migratedTo(t *testing.T, version int64) (string, *sql.DB, *goose.Provider, func(string, ...any) error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1) // foreign keys stay off, as in migrate
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) error {
		_, err := db.ExecContext(context.Background(), q, args...)
		return err
	}
	return path, db, p, exec
}

// dumpRows runs query, which selects one JSON array a row.
func dumpRows(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpEvents lists every event row, every column, in id order.
func dumpEvents(t *testing.T, db *sql.DB) []string {
	t.Helper()
	return dumpRows(t, db, `SELECT json_array(id, action_id, kind, actor, channel, at, data, fanned_out) FROM events ORDER BY id`)
}

// migrationProvider opens the file at path on one connection with foreign
// keys off, as migrate does, and a goose provider of the store's
// migrations on it, to step through them.
func migrationProvider(t *testing.T, path string) (*sql.DB, *goose.Provider) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	return db, p
}

// Migration 00016 rebuilds events so that a staff event may have no
// action. On a database just before it with events (one a notification names,
// one deleted, so that AUTOINCREMENT's mark is past the last id), Up keeps
// every event row and id, the notification's reference and the mark, and
// makes the three indexes of events again unchanged; the store then seals
// the old events and the new ones in id order. Down keeps the action
// events and the NOT NULL, as before.
func TestMigrationAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	db, p := migrationProvider(t, path)
	// 15: every migration before this one (here 00012 is the last).
	if _, err := p.UpTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const id = "01890a5d-0000-7000-8000-000000000001"
	exec(`INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, spec)
		VALUES (?, 'send_email', 'at-most-once', 'email:1', 1, 'pending', '{"a":1}', 'agent:bot', '2031-03-14T09:00:00.000000000Z', '{"name":"t"}')`, id)
	for _, kind := range []string{"submitted", "reminder", "approved", "gone"} {
		exec(`INSERT INTO events (action_id, kind, actor, at, fanned_out) VALUES (?, ?, 'system', '2031-03-14T09:00:01.000000000Z', 1)`, id, kind)
	}
	exec(`DELETE FROM events WHERE kind = 'gone'`)
	exec(`INSERT INTO notifications (id, event_id, action_id, type, channel, kind, created_at, due_at)
		VALUES ('n-1', 2, ?, 'action.reminder', 'ops', 'email', '2031', '2031')`, id)
	dumpEvents := func() string {
		var s string
		if err := db.QueryRowContext(ctx, `SELECT json_group_array(json_array(id, action_id, kind, actor, channel, at, data, fanned_out))
			FROM (SELECT * FROM events ORDER BY id)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before, rowsBefore := readSchema(t, db), dumpEvents()

	if _, err := p.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	if got := dumpEvents(); got != rowsBefore {
		t.Errorf("Up changed the events:\n%s\nwant\n%s", got, rowsBefore)
	}
	after := readSchema(t, db)
	for _, name := range []string{"events_action", "events_kind", "events_fan_out", "notifications"} {
		if after[name] != before[name] {
			t.Errorf("after Up, %s is\n%+v\nwant\n%+v", name, after[name], before[name])
		}
	}
	var broken int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&broken); err != nil || broken != 0 {
		t.Errorf("foreign key check after Up: %d broken, %v", broken, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events, pragma_foreign_key_list('notifications') f WHERE f."table" = 'events'`).Scan(&broken); err != nil || broken == 0 {
		t.Errorf("notifications no longer reference events: %v", err)
	}
	var mark int64
	if err := db.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'events'`).Scan(&mark); err != nil || mark != 4 {
		t.Errorf("AUTOINCREMENT's mark for events after Up: %d, %v; want 4", mark, err)
	}
	_ = db.Close()

	s := openTestStore(t, path)
	if err := s.StaffEventInsert(ctx, queue.Event{Kind: "signed_in", Actor: "user:ann@example.com", Subject: "user:ann@example.com",
		At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := audit.Seal(ctx, s, audit.SealParams{Holder: "t", Lease: time.Minute, Limit: 100}); err != nil {
			t.Fatal(err)
		}
	}
	links, err := s.AuditChainList(ctx, audit.ChainListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range links {
		got = append(got, fmt.Sprintf("%d:%s", l.EventID, l.Event.Kind))
	}
	if strings.Join(got, " ") != "1:submitted 2:reminder 3:approved 5:signed_in" {
		t.Fatalf("sealed %v, want the old events in id order, then the new one with id 5", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db2, p2 := migrationProvider(t, path)
	if _, err := p2.DownTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	var n int
	// 00014 (single sign-on) made room for staff events: going down to 15
	// keeps them, and only the subject goes.
	if err := db2.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 4 {
		t.Errorf("events after Down: %d, %v; want the three action events and the staff event", n, err)
	}
	if err := db2.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('events') WHERE name = 'subject'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("events.subject after Down: %d, %v", n, err)
	}
}

// Migration 00017 gives grants an end reason, as postgres's twin does: a
// revoked grant was revoked by a person; an active grant whose granting
// user is gone, decides nothing or was refused by the identity provider
// ends, revoked by system; the others (and expired ones) stay as they are.
func TestMigrationGrantEnd(t *testing.T) {
	t.Parallel()
	_, db, p, exec := migratedTo(t, 16)
	const past, now, later = "2000-01-01T00:00:00.000000000Z", "2020-01-01T00:00:00.000000000Z", "2999-01-01T00:00:00.000000000Z"
	if err := exec(`
INSERT INTO users (email, password_hash, role, created_at, password_changed_at, sso_denied_at) VALUES
    ('Ann@example.com', 'x', 'approver', ?1, ?1, NULL), ('vic@example.com', 'x', 'viewer', ?1, ?1, NULL),
    ('den@example.com', 'x', 'approver', ?1, ?1, ?1);
INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, expires_at, spec)
VALUES ('act', 't', 'at-most-once', 'k', 1, 'approved', '{}', 'agent:bot', ?1, ?2, '{"name":"t"}');
INSERT INTO grants (id, tool, granted_by, action_id, created_at, expires_at, revoked_at, revoked_by) VALUES
    ('a1', 't', 'user:ann@example.com', 'act', ?1, ?2, NULL, NULL),
    ('a2', 't', 'user:ann@example.com', 'act', ?1, ?2, ?1, 'user:ops@example.com'),
    ('a3', 't', 'user:vic@example.com', 'act', ?1, ?2, NULL, NULL),
    ('a4', 't', 'user:den@example.com', 'act', ?1, ?2, NULL, NULL),
    ('a5', 't', 'user:gone@example.com', 'act', ?1, ?2, NULL, NULL),
    ('a6', 't', 'user:gone@example.com', 'act', ?3, ?1, NULL, NULL);`, now, later, past); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), 17); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := db.QueryRowContext(t.Context(), `SELECT group_concat(id || ':' || coalesce(end_reason, '-') || ':' || coalesce(revoked_by, '-'), ' ')
		FROM (SELECT * FROM grants ORDER BY id)`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	want := "a1:-:- a2:revoked:user:ops@example.com a3:granter_demoted:system a4:granter_refused:system a5:granter_removed:system a6:-:-"
	if got != want {
		t.Fatalf("after 00017:\n%s\nwant:\n%s", got, want)
	}
	if err := exec(`UPDATE grants SET end_reason = 'forgotten' WHERE id = 'a1'`); err == nil {
		t.Fatal("an unknown end reason was stored")
	}
	if _, err := p.DownTo(t.Context(), 16); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), 17); err != nil {
		t.Fatal(err)
	}
}

// Migration 00022 keeps the chain in one row per sealing round, as
// postgres's twin does. Going down gives the links one a row again, with
// the schema 00018 left; going up turns each stored link into a round of
// its own, so that a prev_hash edited before the migration is still found
// at its seq after it. A round sealed after it is one row.
func TestMigrationAuditRounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	db, p := migrationProvider(t, path)
	// 18: the last migration before this one on this branch.
	if _, err := p.UpTo(ctx, 18); err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprint(readSchema(t, db))
	count := func(db *sql.DB, q string) (n int) {
		t.Helper()
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	_ = db.Close()

	// Seven events sealed in three rounds (3, 2, 2) by the current store.
	s := openTestStore(t, path)
	staff := func(n int) {
		t.Helper()
		for i := range n {
			if err := s.StaffEventInsert(ctx, queue.Event{Kind: "signed_in", Actor: "user:ann@example.com",
				Subject: fmt.Sprintf("user:u%d@example.com", i), At: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := audit.Seal(ctx, s, audit.SealParams{Holder: "t", Lease: time.Minute, Limit: 100}); err != nil || res.Sealed != n {
			t.Fatalf("sealed %+v, %v; want %d", res, err, n)
		}
	}
	staff(3)
	staff(2)
	staff(2)
	if rep, err := audit.VerifyStore(ctx, s); err != nil || rep.Problem != nil || rep.Last.Seq != 7 {
		t.Fatalf("verify the rounds: %+v, %v", rep, err)
	}
	db, p = migrationProvider(t, path)
	if n := count(db, `SELECT count(*) FROM audit_round`); n != 3 {
		t.Fatalf("7 events sealed in 3 rounds are %d rows, want 3", n)
	}

	if _, err := p.DownTo(ctx, 18); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readSchema(t, db)); got != before {
		t.Errorf("schema after Down:\n%s\nwant:\n%s", got, before)
	}
	if n := count(db, `SELECT count(*) FROM audit_chain c JOIN events e ON e.id = c.event_id
		WHERE c.seq BETWEEN 1 AND 7 AND length(c.prev_hash) = 32 AND length(c.hash) = 32`); n != 7 {
		t.Fatalf("after Down, %d links of their events, want 7", n)
	}
	// A hand edits the link at seq 3 while the links stand one a row.
	if _, err := db.ExecContext(ctx, `UPDATE audit_chain SET prev_hash = unhex(printf('%.64c', 'A')) WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}

	if _, err := p.UpTo(ctx, 22); err != nil {
		t.Fatal(err)
	}
	if n := count(db, `SELECT count(*) FROM audit_round WHERE json_array_length(event_ids) = 1`); n != 7 {
		t.Fatalf("after Up, %d rounds of one link, want 7", n)
	}
	rep, err := audit.VerifyStore(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Problem == nil || rep.Problem.Seq != 3 || rep.Problem.Kind != audit.Changed {
		t.Fatalf("verify after Up: %+v, want seq 3 changed", rep.Problem)
	}
	staff(4)
	if n := count(db, `SELECT count(*) FROM audit_round WHERE seq = 8 AND json_array_length(event_ids) = 4`); n != 1 {
		t.Fatalf("the 4 events sealed after Up are not one round at seq 8")
	}
}

// Migration 00025 lets a plan be stored expired (the sweep writes it),
// rebuilding plans with its steps' references intact; going down turns an
// expired plan back into the state it expired from.
func TestMigrationPlanExpiry(t *testing.T) {
	t.Parallel()
	_, db, p, exec := migratedTo(t, 22)
	const now, later = "2020-01-01T00:00:00.000000000Z", "2020-01-02T00:00:00.000000000Z"
	if err := exec(`
INSERT INTO plans (id, title, agent, ordered, state, created_at, expires_at, version)
VALUES ('p1', 'pending one', 'agent:bot', 0, 'pending', ?1, ?2, 3), ('p2', 'approved one', 'agent:bot', 1, 'approved', ?1, ?2, 0);
INSERT INTO plan_steps (plan_id, n, tool, class, intent_key, payload, decision)
VALUES ('p1', 1, 't', 'at-most-once', 'k1', '{"a":1}', 'human'), ('p2', 1, 't', 'at-most-once', 'k2', '{}', 'none');`, now, later); err != nil {
		t.Fatal(err)
	}
	if err := exec(`UPDATE plans SET state = 'expired' WHERE id = 'p1'`); err == nil {
		t.Fatal("before 00025 a plan was stored expired")
	}
	if _, err := p.UpTo(t.Context(), 25); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := db.QueryRowContext(t.Context(), `SELECT group_concat(p.id || ':' || p.state || ':' || p.version || ':' || s.intent_key, ' ')
		FROM (SELECT * FROM plans ORDER BY id) p JOIN plan_steps s ON s.plan_id = p.id`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "p1:pending:3:k1 p2:approved:0:k2" {
		t.Fatalf("after 00025: %s", got)
	}
	if err := exec(`UPDATE plans SET state = 'expired', decided_by = 'system', decided_at = ?1 WHERE id = 'p1'`, now); err != nil {
		t.Fatalf("an expired plan: %v", err)
	}
	if err := exec(`UPDATE plans SET state = 'expired' WHERE id = 'p2'`); err != nil {
		t.Fatalf("an expired plan: %v", err)
	}
	// The steps still reference plans, and every reference resolves.
	var ref string
	var broken int
	if err := db.QueryRowContext(t.Context(), `SELECT "table" FROM pragma_foreign_key_list('plan_steps') WHERE "from" = 'plan_id'`).Scan(&ref); err != nil || ref != "plans" {
		t.Fatalf("plan_steps.plan_id references %q (%v), want plans", ref, err)
	}
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pragma_foreign_key_check('plan_steps')`).Scan(&broken); err != nil || broken != 0 {
		t.Fatalf("%d broken references from plan_steps (%v)", broken, err)
	}
	if _, err := p.DownTo(t.Context(), 22); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(t.Context(), `SELECT group_concat(id || ':' || state || ':' || coalesce(decided_by, '-'), ' ')
		FROM (SELECT * FROM plans ORDER BY id)`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "p1:pending:- p2:approved:-" {
		t.Fatalf("after going down: %s", got)
	}
	if _, err := p.UpTo(t.Context(), 25); err != nil {
		t.Fatal(err)
	}
}
