package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/migrations"
	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// Three server processes started at once on a fresh schema: one applies
// the migrations under the advisory lock while the others wait, then all
// start, and the schema is exactly what one process alone builds. Opening
// takes about as long as migrating, so racing Open itself leaves the
// migrations overlapping only now and then: the three race the migration
// step of Open on pools that are already connected, then open.
func TestMigrationsFromThreeProcessesAtOnce(t *testing.T) {
	t.Parallel()
	ref := describeSchema(t, pgtest.Open(t).Pool())
	if !strings.Contains(ref, "CREATE UNIQUE INDEX actions_held_intent ON actions") {
		t.Fatalf("the description of a migrated schema misses the held-intent index:\n%s", ref)
	}
	for round := range 4 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			t.Parallel()
			migrateThreeAtOnce(t, ref)
		})
	}
}

func migrateThreeAtOnce(t *testing.T, wantSchema string) {
	u := pgtest.URL(t)
	const n = 3
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		p, err := pgxpool.New(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		if err := p.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		pools[i] = p
	}
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = postgres.MigrateSchema(ctx, pools[i])
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: migrate: %v", i, err)
		}
	}

	// Each migration applied once: goose records every application.
	want, err := fs.Glob(migrations.Postgres(), "*.sql")
	if err != nil || len(want) == 0 {
		t.Fatalf("embedded migrations: %v %v", want, err)
	}
	rows, err := pools[0].Query(ctx,
		`SELECT version_id, count(*) FROM goose_db_version WHERE version_id > 0 GROUP BY version_id ORDER BY version_id`)
	if err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	var applied []string
	for rows.Next() {
		var v, count int64
		if err := rows.Scan(&v, &count); err != nil {
			t.Fatal(err)
		}
		if count != 1 {
			t.Errorf("migration %d recorded %d times", v, count)
		}
		applied = append(applied, fmt.Sprint(v))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(applied) != len(want) {
		t.Fatalf("applied migrations %v, want one per file of %v", applied, want)
	}
	// The schema is the one a lone process builds.
	if got := describeSchema(t, pools[0]); got != wantSchema {
		t.Fatalf("schema built by three processes differs from one built alone:\n%s\nwant:\n%s", got, wantSchema)
	}

	// All three start on it, at once, and work: a claim made through one
	// is held for the others.
	stores := make([]*postgres.Store, n)
	start = make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = postgres.Open(ctx, u, postgres.Options{MaxConns: 4})
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if stores[i] != nil {
			t.Cleanup(func() { _ = stores[i].Close() })
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: open: %v", i, err)
		}
	}
	now := time.Date(2031, time.March, 14, 9, 0, 0, 0, time.UTC)
	for i, s := range stores {
		a := &queue.Action{ID: queue.NewID(now), Tool: "issue_refund", Class: classify.ExactlyOnce, IntentKey: "migrated",
			State: queue.StateInProgress, Payload: json.RawMessage(`{"n":1}`), RequestedBy: "agent:test", CreatedAt: now,
			ClaimedAt: &now, Spec: classify.Tool{Name: "issue_refund", Class: classify.ExactlyOnce, ClaimTimeout: time.Minute}}
		res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: queue.Event{Kind: queue.EventSubmitted, Actor: a.RequestedBy, At: now}})
		created := res.Created
		if err != nil {
			t.Fatalf("process %d: submit: %v", i, err)
		}
		if created != (i == 0) {
			t.Fatalf("process %d: created %v, want %v", i, created, i == 0)
		}
	}
}

// describeSchema lists the current schema's columns, constraints and
// indexes, with the schema's name left out so two schemas compare.
func describeSchema(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `
SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
FROM information_schema.columns WHERE table_schema = current_schema()
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
UNION ALL
SELECT 'index ' || replace(indexdef, current_schema() || '.', '')
FROM pg_indexes WHERE schemaname = current_schema()
ORDER BY 1`)
	if err != nil {
		t.Fatalf("describe schema: %v", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Migration 00012 lets an at-least-once action end done or failed and
// takes that class out of actions_held_intent. On a schema at 00011
// holding an at-least-once action recorded by an upstream call (with its
// result and error), Up keeps the rows as they were and changes only the
// CHECK and the index's predicate; Down turns an at-least-once done back
// into recorded and leaves the schema exactly as it was at 00011.
func TestMigrationAtLeastOnceOutcomes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, p := migrationProvider(t, pgtest.URL(t))
	if _, err := p.UpTo(ctx, 11); err != nil {
		t.Fatal(err)
	}
	const recorded, done = "01890a5d-0000-7000-8000-000000000001", "01890a5d-0000-7000-8000-000000000002"
	_, err := pool.Exec(ctx, `
INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, result, error, requested_by,
    created_at, finished_at, claimed_at, claim_deadline, spec)
VALUES ($1, 'crm_lookup', 'at-least-once', 'lookup:c-1', 1, 'recorded', '{"a":1}',
        '{"content":[{"type":"text","text":"not found"}],"isError":true}', 'not found', 'agent:bot',
        '2031-03-14T09:00:00Z', '2031-03-14T09:00:01Z', NULL, NULL, '{"name":"crm_lookup"}'),
       ($2, 'issue_refund', 'exactly-once', 'lookup:c-1', 1, 'done', '{"a":1}', '{"ok":true}', NULL, 'agent:bot',
        '2031-03-14T09:00:00Z', '2031-03-14T09:00:01Z', '2031-03-14T09:00:00Z', '2031-03-14T09:05:00Z', '{"name":"issue_refund"}')`,
		recorded, done)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO events (action_id, kind, actor, at) VALUES ($1, 'failed', 'dispatcher', '2031-03-14T09:00:01Z')`, recorded); err != nil {
		t.Fatal(err)
	}
	dump := func() string {
		var rows string
		if err := pool.QueryRow(ctx, `SELECT json_agg(a ORDER BY id)::text FROM actions a`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	before, rowsBefore := describeSchema(t, pool), dump()

	if _, err := p.UpTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer(
		"constraint actions actions_recorded_iff_at_least_once CHECK (((class = 'at-least-once'::text) = (state = 'recorded'::text)))\n",
		"constraint actions actions_at_least_once_states CHECK (((class <> 'at-least-once'::text) OR (state = ANY (ARRAY['recorded'::text, 'done'::text, 'failed'::text]))))\n"+
			"constraint actions actions_recorded_only_at_least_once CHECK (((state <> 'recorded'::text) OR (class = 'at-least-once'::text)))\n",
		"WHERE (state = ANY (ARRAY['pending'::text, 'approved'::text, 'rejected'::text, 'in_progress'::text, 'done'::text]))\n",
		"WHERE ((state = ANY (ARRAY['pending'::text, 'approved'::text, 'rejected'::text, 'in_progress'::text, 'done'::text])) AND (class <> 'at-least-once'::text))\n",
	).Replace(before)
	if want == before {
		t.Fatalf("the expected changes do not apply to the schema at 00011:\n%s", before)
	}
	// describeSchema sorts its lines; so must the expectation.
	lines := strings.SplitAfter(want, "\n")
	slices.Sort(lines)
	want = strings.Join(lines, "")
	if got := describeSchema(t, pool); got != want {
		t.Errorf("schema after Up:\n%s\nwant:\n%s", got, want)
	}
	if got := dump(); got != rowsBefore {
		t.Errorf("Up changed the rows:\n%s\nwant:\n%s", got, rowsBefore)
	}

	// The new CHECKs: at-least-once may end done or failed, never anything
	// else; recorded stays that class's alone.
	if _, err := pool.Exec(ctx, `UPDATE actions SET state = 'done' WHERE id = $1`, recorded); err != nil {
		t.Errorf("at-least-once done refused: %v", err)
	}
	for _, c := range []struct{ id, set, check string }{
		{recorded, "state = 'in_progress', claimed_at = now(), claim_deadline = now()", "actions_at_least_once_states"},
		{done, "state = 'recorded'", "actions_recorded_only_at_least_once"},
	} {
		if _, err := pool.Exec(ctx, `UPDATE actions SET `+c.set+` WHERE id = $1`, c.id); err == nil || !strings.Contains(err.Error(), c.check) {
			t.Errorf("%s of %s: %v, want refused by %s", c.set, c.id, err, c.check)
		}
	}

	if _, err := p.DownTo(ctx, 11); err != nil {
		t.Fatal(err)
	}
	if got := describeSchema(t, pool); got != before {
		t.Errorf("schema after Down:\n%s\nwant:\n%s", got, before)
	}
	if got := dump(); got != rowsBefore {
		t.Errorf("Down did not bring the at-least-once done back to recorded:\n%s\nwant:\n%s", got, rowsBefore)
	}
}

// Migration 00013 (policies and grants) admits every class but
// at-least-once in the approval states, adds actions.grant_id, the grants
// table and two indexes. On a schema at 00012, Up keeps the rows as they
// were; the new CHECKs hold; Down ends an exactly-once action a person
// decides as cancelled and leaves the schema exactly as it was at 00012.
func TestMigrationPoliciesAndGrants(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, p := migrationProvider(t, pgtest.URL(t))
	if _, err := p.UpTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	const mail, refund, gated = "01890a5d-0000-7000-8000-000000000001", "01890a5d-0000-7000-8000-000000000002", "01890a5d-0000-7000-8000-000000000003"
	_, err := pool.Exec(ctx, `
INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, expires_at, spec)
VALUES ($1, 'send_customer_email', 'at-most-once', 'email:c-1:t', 1, 'pending', '{"a":1}', 'agent:bot',
        '2031-03-14T09:00:00Z', '2031-03-17T09:00:00Z', '{"name":"send_customer_email"}');
`, mail)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, result, requested_by, created_at, finished_at,
    claimed_at, claim_deadline, spec)
VALUES ($1, 'issue_refund', 'exactly-once', 'refund:o-1:1', 1, 'done', '{"a":1}', '{"ok":true}', 'agent:bot',
        '2031-03-14T09:00:00Z', '2031-03-14T09:00:01Z', '2031-03-14T09:00:00Z', '2031-03-14T09:05:00Z', '{"name":"issue_refund"}')`, refund); err != nil {
		t.Fatal(err)
	}
	dump := func() string {
		var rows string
		if err := pool.QueryRow(ctx, `SELECT json_agg(to_jsonb(a) - 'grant_id' ORDER BY id)::text FROM actions a`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	before, rowsBefore := describeSchema(t, pool), dump()
	if _, err := p.UpTo(ctx, 13); err != nil {
		t.Fatal(err)
	}
	if got := dump(); got != rowsBefore {
		t.Errorf("Up changed the rows:\n%s\nwant:\n%s", got, rowsBefore)
	}
	// An exactly-once action may now wait for a person; at-least-once may not.
	if _, err := pool.Exec(ctx, `INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, spec)
		VALUES ($1, 'issue_refund', 'exactly-once', 'refund:o-2:1', 1, 'pending', '{}', 'agent:bot', now(), '{}')`, gated); err != nil {
		t.Errorf("an exactly-once action pending: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, spec)
		VALUES ($1, 'cache', 'at-least-once', '', 1, 'approved', '{}', 'agent:bot', now(), '{}')`, "01890a5d-0000-7000-8000-000000000004"); err == nil {
		t.Error("an at-least-once action approved: stored")
	}
	_, err = pool.Exec(ctx, `INSERT INTO grants (id, tool, granted_by, action_id, created_at, expires_at, max_uses, uses)
		VALUES ('01890a5d-0000-7000-8000-0000000000aa', 'send_customer_email', 'user:ann@example.com', $1, now(), now() + interval '1 hour', 2, 3)`, mail)
	if err == nil || !strings.Contains(err.Error(), "grants_uses_within") {
		t.Errorf("a grant used beyond its limit: %v, want refused by grants_uses_within", err)
	}
	if _, err := p.DownTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	if got := describeSchema(t, pool); got != before {
		t.Errorf("schema after Down:\n%s\nwant:\n%s", got, before)
	}
	var state string
	if err := pool.QueryRow(ctx, `SELECT state FROM actions WHERE id = $1`, gated).Scan(&state); err != nil || state != "cancelled" {
		t.Errorf("after Down the pending exactly-once action is %q (%v), want cancelled", state, err)
	}
}

// Migration 00014 adds the users' single sign-on columns and sso_states,
// and lets an event have no action (a staff event). Up keeps the rows;
// Down removes the staff events and leaves the schema exactly as it was at
// 00013.
func TestMigrationSSO(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, p := migrationProvider(t, pgtest.URL(t))
	if _, err := p.UpTo(ctx, 13); err != nil {
		t.Fatal(err)
	}
	const id = "01890a5d-0000-7000-8000-000000000001"
	if _, err := pool.Exec(ctx, `INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, spec)
VALUES ($1, 't', 'at-most-once', 'k:1', 1, 'pending', '{}', 'agent:bot', '2031-03-14T09:00:00Z', '{"name":"t"}')`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO events (action_id, kind, actor, at) VALUES ($1, 'submitted', 'agent:bot', '2031-03-14T09:00:00Z')`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO users (email, password_hash, role, created_at, password_changed_at)
VALUES ('ann@example.com', 'h', 'admin', '2031-03-14T09:00:00Z', '2031-03-14T09:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	dump := func() string {
		var rows string
		if err := pool.QueryRow(ctx, `SELECT json_build_array((SELECT json_agg(e ORDER BY id) FROM events e WHERE action_id IS NOT NULL),
			(SELECT json_agg(json_build_array(u.id, u.email, u.role)) FROM users u))::text`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	before, rowsBefore := describeSchema(t, pool), dump()

	if _, err := p.UpTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	if got := dump(); got != rowsBefore {
		t.Errorf("Up changed the rows:\n%s\nwant:\n%s", got, rowsBefore)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO events (action_id, kind, actor, at, fanned_out) VALUES (NULL, 'signed_in', 'user:ann@example.com', now(), true)`); err != nil {
		t.Fatalf("a staff event after Up: %v", err)
	}
	for _, c := range []struct{ q, check string }{
		{`UPDATE users SET idp_groups = '{}'`, "users_idp_groups_array"},
		{`UPDATE users SET idp_synced_at = now()`, "users_idp_synced_with_subject"},
		{`INSERT INTO sso_states VALUES ('h', now())`, ""},
		{`INSERT INTO sso_states VALUES ('h', now())`, "sso_states_pkey"},
	} {
		_, err := pool.Exec(ctx, c.q)
		if c.check == "" && err != nil || c.check != "" && (err == nil || !strings.Contains(err.Error(), c.check)) {
			t.Errorf("%s: %v, want %q", c.q, err, c.check)
		}
	}

	if _, err := p.DownTo(ctx, 13); err != nil {
		t.Fatal(err)
	}
	if got := describeSchema(t, pool); got != before {
		t.Errorf("schema after Down:\n%s\nwant:\n%s", got, before)
	}
	if got := dump(); got != rowsBefore {
		t.Errorf("Down changed the rows:\n%s\nwant:\n%s", got, rowsBefore)
	}
	var staff int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&staff); err != nil || staff != 1 {
		t.Errorf("events after Down: %d (%v), want the action's one", staff, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
}

// migrationProvider connects to u and returns the pool and a goose
// provider of the store's migrations on it, to step through them.
func migrationProvider(t *testing.T, u string) (*pgxpool.Pool, *goose.Provider) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	return pool, p
}

// Migration 00016 adds the audit chain. On a schema just before it holding
// events, Up rewrites no row: the old events keep their ids and get txid 0,
// so the sealer seals them first, in id order, before every event written
// after it; a staff event has no action, and only a staff event a
// subject. Down leaves the schema as it was before.
func TestMigrationAudit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := pgtest.URL(t)
	pool, p := migrationProvider(t, u)
	// 15: every migration before this one (here 00012 is the last).
	if _, err := p.UpTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	const id = "01890a5d-0000-7000-8000-000000000001"
	if _, err := pool.Exec(ctx, `INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, spec)
VALUES ($1, 'send_email', 'at-most-once', 'email:1', 1, 'pending', '{"a":1}', 'agent:bot', '2031-03-14T09:00:00Z', '{"name":"send_email"}')`, id); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"submitted", "reminder", "approved"} {
		if _, err := pool.Exec(ctx, `INSERT INTO events (action_id, kind, actor, at) VALUES ($1, $2, 'system', '2031-03-14T09:00:01Z')`, id, kind); err != nil {
			t.Fatal(err)
		}
	}
	before := describeSchema(t, pool)
	if _, err := p.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	var zero int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE txid = '0' AND subject IS NULL`).Scan(&zero); err != nil || zero != 3 {
		t.Fatalf("old events with txid 0: %d, %v", zero, err)
	}
	q := `INSERT INTO events (action_id, subject, kind, actor, at) VALUES ('` + id + `', 'user:x', 'signed_in', 'x', now())`
	if _, err := pool.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "events_subject_staff_only") {
		t.Errorf("an event with an action and a subject: %v, want refused by events_subject_staff_only", err)
	}

	// The store seals the old events first, then the new ones.
	st := pgtest.OpenURL(t, u)
	if err := st.StaffEventInsert(ctx, queue.Event{Kind: "signed_in", Actor: "user:ann@example.com",
		Subject: "user:ann@example.com", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	apptest.SealAll(t, st)
	links, err := st.AuditChainList(ctx, audit.ChainListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, l := range links {
		kinds = append(kinds, l.Event.Kind)
	}
	if got := strings.Join(kinds, " "); got != "submitted reminder approved signed_in" {
		t.Fatalf("sealed in the order %s, want the old events first", got)
	}
	if links[0].Event.Action == nil || string(links[0].Event.Action.Payload) != `{"a":1}` {
		t.Fatalf("the old submitted event's submission: %+v", links[0].Event.Action)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := p.DownTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	if got := describeSchema(t, pool); got != before {
		t.Errorf("schema after Down:\n%s\nwant:\n%s", got, before)
	}
}

// Migration 00017 gives grants an end reason: a revoked grant was revoked
// by a person; an active grant whose granting user is gone, decides
// nothing or was refused by the identity provider ends, revoked by system,
// with the reason; the others (and expired ones) stay as they are. Down
// and Up again keep the rows.
func TestMigrationGrantEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, p := migrationProvider(t, pgtest.URL(t))
	if _, err := p.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `
INSERT INTO users (email, password_hash, role, created_at, password_changed_at, sso_denied_at) VALUES
    ('Ann@example.com', 'x', 'approver', now(), now(), NULL),
    ('vic@example.com', 'x', 'viewer', now(), now(), NULL),
    ('den@example.com', 'x', 'approver', now(), now(), now());
INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by, created_at, expires_at, spec)
VALUES ('01890a5d-0000-7000-8000-000000000001', 't', 'at-most-once', 'k', 1, 'approved', '{}', 'agent:bot',
        now(), now() + interval '1 day', '{"name":"t"}');
INSERT INTO grants (id, tool, granted_by, action_id, created_at, expires_at, revoked_at, revoked_by) VALUES
    ('01890a5d-0000-7000-8000-0000000000a1', 't', 'user:ann@example.com', '01890a5d-0000-7000-8000-000000000001', now(), now() + interval '1 day', NULL, NULL),
    ('01890a5d-0000-7000-8000-0000000000a2', 't', 'user:ann@example.com', '01890a5d-0000-7000-8000-000000000001', now(), now() + interval '1 day', now(), 'user:ops@example.com'),
    ('01890a5d-0000-7000-8000-0000000000a3', 't', 'user:vic@example.com', '01890a5d-0000-7000-8000-000000000001', now(), now() + interval '1 day', NULL, NULL),
    ('01890a5d-0000-7000-8000-0000000000a4', 't', 'user:den@example.com', '01890a5d-0000-7000-8000-000000000001', now(), now() + interval '1 day', NULL, NULL),
    ('01890a5d-0000-7000-8000-0000000000a5', 't', 'user:gone@example.com', '01890a5d-0000-7000-8000-000000000001', now(), now() + interval '1 day', NULL, NULL),
    ('01890a5d-0000-7000-8000-0000000000a6', 't', 'user:gone@example.com', '01890a5d-0000-7000-8000-000000000001', now() - interval '2 days', now() - interval '1 day', NULL, NULL);
`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 17); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := pool.QueryRow(ctx, `SELECT string_agg(right(id::text, 2) || ':' || coalesce(end_reason, '-') || ':' || coalesce(revoked_by, '-'), ' ' ORDER BY id) FROM grants`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	want := "a1:-:- a2:revoked:user:ops@example.com a3:granter_demoted:system a4:granter_refused:system a5:granter_removed:system a6:-:-"
	if got != want {
		t.Fatalf("after 00017:\n%s\nwant:\n%s", got, want)
	}
	if _, err := pool.Exec(ctx, `UPDATE grants SET end_reason = 'revoked' WHERE id = '01890a5d-0000-7000-8000-0000000000a1'`); err == nil {
		t.Fatal("an end reason without a revocation was stored")
	}
	if _, err := p.DownTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 17); err != nil {
		t.Fatal(err)
	}
}

// Migration 00022 keeps the chain in one row per sealing round. Going down
// gives the links one a row again, with the schema 00018 left; going up
// turns each stored link into a round of its own, so that every link is
// read back as it was stored: a prev_hash edited before the migration is
// still found at its seq after it. A round sealed after it is one row.
func TestMigrationAuditRounds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := pgtest.URL(t)
	pool, p := migrationProvider(t, u)
	// 18: the last migration before this one on this branch.
	if _, err := p.UpTo(ctx, 18); err != nil {
		t.Fatal(err)
	}
	before := describeSchema(t, pool)
	count := func(q string) (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}

	// Seven events sealed in three rounds (3, 2, 2) by the current store.
	// Each round waits until all its events are below the horizon (other
	// tests' transactions on the cluster may hold it a moment), so that
	// one call of the sealer takes them all.
	st := pgtest.OpenURL(t, u)
	staff := func(n int) {
		t.Helper()
		for i := range n {
			if err := st.StaffEventInsert(ctx, queue.Event{Kind: "signed_in", Actor: "user:ann@example.com",
				Subject: fmt.Sprintf("user:u%d@example.com", i), At: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		head, err := st.AuditHeadGet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			list, err := st.AuditSealableList(ctx, audit.SealableListParams{After: head.Cursor, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Events) == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d events sealable after 30 s", len(list.Events), n)
			}
		}
		if res, err := audit.Seal(ctx, st, audit.SealParams{Holder: "t", Lease: time.Minute, Limit: 100}); err != nil || res.Sealed != n {
			t.Fatalf("sealed %+v, %v; want %d", res, err, n)
		}
	}
	staff(3)
	staff(2)
	staff(2)
	if n := count(`SELECT count(*) FROM audit_round`); n != 3 {
		t.Fatalf("7 events sealed in 3 rounds are %d rows, want 3", n)
	}
	if rep, err := audit.VerifyStore(ctx, st); err != nil || rep.Problem != nil || rep.Last.Seq != 7 {
		t.Fatalf("verify the rounds: %+v, %v", rep, err)
	}

	if _, err := p.DownTo(ctx, 18); err != nil {
		t.Fatal(err)
	}
	if got := describeSchema(t, pool); got != before {
		t.Errorf("schema after Down:\n%s\nwant:\n%s", got, before)
	}
	if n := count(`SELECT count(*) FROM audit_chain c JOIN events e ON e.id = c.event_id
		WHERE c.seq BETWEEN 1 AND 7 AND length(c.prev_hash) = 32 AND length(c.hash) = 32`); n != 7 {
		t.Fatalf("after Down, %d links of their events, want 7", n)
	}
	// A hand edits the link at seq 3 while the links stand one a row.
	if _, err := pool.Exec(ctx, `UPDATE audit_chain SET prev_hash = decode(repeat('ab', 32), 'hex') WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}

	if _, err := p.UpTo(ctx, 22); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM audit_round WHERE cardinality(event_ids) = 1`); n != 7 {
		t.Fatalf("after Up, %d rounds of one link, want 7", n)
	}
	rep, err := audit.VerifyStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Problem == nil || rep.Problem.Seq != 3 || rep.Problem.Kind != audit.Changed {
		t.Fatalf("verify after Up: %+v, want seq 3 changed", rep.Problem)
	}
	staff(4)
	if n := count(`SELECT count(*) FROM audit_round WHERE seq = 8 AND cardinality(event_ids) = 4`); n != 1 {
		t.Fatalf("the 4 events sealed after Up are not one round at seq 8")
	}
}

// Migration 00025 lets a plan be stored expired (the sweep writes it);
// going down turns an expired plan back into the state it expired from.
func TestMigrationPlanExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, p := migrationProvider(t, pgtest.URL(t))
	if _, err := p.UpTo(ctx, 22); err != nil {
		t.Fatal(err)
	}
	const p1, p2 = "01890a5d-0000-7000-8000-0000000000b1", "01890a5d-0000-7000-8000-0000000000b2"
	if _, err := pool.Exec(ctx, `
INSERT INTO plans (id, title, agent, ordered, state, created_at, expires_at)
VALUES ($1, 'pending one', 'agent:bot', false, 'pending', now(), now()), ($2, 'approved one', 'agent:bot', false, 'approved', now(), now());`, p1, p2); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE plans SET state = 'expired' WHERE id = $1`, p1); err == nil {
		t.Fatal("before 00025 a plan was stored expired")
	}
	if _, err := p.UpTo(ctx, 25); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE plans SET state = 'expired', decided_by = 'system', decided_at = now() WHERE id = $1`, p1); err != nil {
		t.Fatalf("an expired pending plan: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE plans SET state = 'expired' WHERE id = $1`, p2); err != nil {
		t.Fatalf("an expired approved plan: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE plans SET state = 'done' WHERE id = $1`, p2); err == nil {
		t.Fatal("a plan was stored done: done is computed, not stored")
	}
	if _, err := p.DownTo(ctx, 22); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := pool.QueryRow(ctx, `SELECT string_agg(right(id::text, 2) || ':' || state || ':' || coalesce(decided_by, '-'), ' ' ORDER BY id) FROM plans`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "b1:pending:- b2:approved:-" {
		t.Fatalf("after going down: %s", got)
	}
	if _, err := p.UpTo(ctx, 25); err != nil {
		t.Fatal(err)
	}
}
