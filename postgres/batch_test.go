package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// blockWorkers holds a transaction-level advisory lock in its own
// connection and gives each of the batchers' workers a call that waits for
// it, so calls made afterwards queue up and form the next batch. release
// lets the blocked calls finish.
func blockWorkers(t *testing.T, pool *pgxpool.Pool, batchers ...*postgres.TestBatcher) (release func()) {
	t.Helper()
	ctx := t.Context()
	key, unlock := holdAdvisoryLock(t, pool)
	var wg sync.WaitGroup
	for _, b := range batchers {
		wg.Go(func() {
			if _, err := b.QueryInt(ctx, "", `SELECT 0::bigint FROM pg_advisory_xact_lock($1)`, key); err != nil {
				t.Errorf("blocking call: %v", err)
			}
		})
	}
	// Wait until every blocking call is running inside PostgreSQL, so no
	// worker is free to take the calls that follow one by one.
	waitLockWaiters(t, pool, key, len(batchers))
	var once sync.Once
	release = func() {
		once.Do(func() {
			unlock()
			wg.Wait()
		})
	}
	// A test that fails before releasing must not leave its batcher's Stop
	// waiting on the lock forever.
	t.Cleanup(release)
	return release
}

// holdAdvisoryLock takes a transaction-level advisory lock of a key of its
// own (so parallel tests do not wait for each other) in its own
// connection; unlock, also run at the end of the test, releases it.
func holdAdvisoryLock(t *testing.T, pool *pgxpool.Pool) (key int32, unlock func()) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	key = rand.Int32N(1 << 30)
	if _, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			// Not the test's context: on a failed test this runs as a
			// cleanup, after that context ended.
			if err := tx.Rollback(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(unlock)
	return key, unlock
}

// waitLockWaiters waits until n sessions wait for the advisory lock key.
func waitLockWaiters(t *testing.T, pool *pgxpool.Pool, key int32, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d calls to wait on the lock", n), func() bool {
		var got int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1`, key).Scan(&got)
		return err == nil && got == n
	})
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBatcherSharesOneTransaction: calls queued while the worker is busy run
// as one batch, in one transaction, and each gets its own row back.
func TestBatcherSharesOneTransaction(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	b := postgres.NewTestBatcher(pool, 1)
	t.Cleanup(b.Stop)
	release := blockWorkers(t, pool, b)

	const n = 20
	type result struct {
		n, xid int64
		err    error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Each call returns its own argument and its transaction id.
			v, err := b.QueryInt(t.Context(), "", `SELECT $1::bigint * 1000000000000 + txid_current()`, i)
			results[i] = result{v / 1_000_000_000_000, v % 1_000_000_000_000, err}
		})
	}
	waitFor(t, "all calls to queue", func() bool { return b.Waiting() == n })
	release()
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
		if r.n != int64(i) {
			t.Errorf("call %d got the row of call %d", i, r.n)
		}
		if r.xid != results[0].xid {
			t.Errorf("call %d ran in transaction %d, call 0 in %d: not one batch", i, r.xid, results[0].xid)
		}
	}
	if b.Refused() != 0 {
		t.Errorf("refused batches = %d, want 0", b.Refused())
	}
}

// TestBatcherSpillsOnlyForEnoughCalls: while a batch is in flight, calls
// wait for it rather than go out in small batches of their own, until
// enough of them wait to make a second batch worth its cost.
func TestBatcherSpillsOnlyForEnoughCalls(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	b := postgres.NewTestBatcher(pool, 2)
	t.Cleanup(b.Stop)
	release := blockWorkers(t, pool, b) // one worker holds a blocked batch

	const spill = 8
	xids := make([]int64, spill)
	errs := make([]error, spill)
	var wg sync.WaitGroup
	query := func(i int) {
		wg.Go(func() { xids[i], errs[i] = b.QueryInt(t.Context(), "", `SELECT txid_current()`) })
	}
	for i := range spill - 1 {
		query(i)
	}
	waitFor(t, "the calls to queue", func() bool { return b.Waiting() == spill-1 })
	// The idle worker leaves them: with the rule broken it takes them at
	// once, so a pause is enough to see it (and cannot fail a correct rule).
	time.Sleep(100 * time.Millisecond)
	if n := b.Waiting(); n != spill-1 {
		t.Fatalf("%d calls waiting after a pause, want %d: a second batch went out for fewer than %d", n, spill-1, spill)
	}
	query(spill - 1)
	// Now the second worker sends them, while the first batch is blocked.
	wg.Wait()
	for i := range spill {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if xids[i] != xids[0] {
			t.Errorf("call %d ran in transaction %d, call 0 in %d: not one batch", i, xids[i], xids[0])
		}
	}
	release()
}

// TestBatcherStopAnswersWaitingCalls: stopping lets the batch in flight
// finish, answers the calls no worker took, and refuses new ones.
func TestBatcherStopAnswersWaitingCalls(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	b := postgres.NewTestBatcher(pool, 1)
	release := blockWorkers(t, pool, b)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = b.QueryInt(t.Context(), "", `SELECT 1::bigint`) })
	}
	waitFor(t, "the calls to queue", func() bool { return b.Waiting() == 2 })
	stopped := make(chan struct{})
	go func() {
		b.Stop()
		close(stopped)
	}()
	wg.Wait() // answered while the batch in flight still waits
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("waiting call %d: err=%v, want the store closed", i, err)
		}
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned with a batch in flight")
	default:
	}
	release() // the blocked batch finishes, then Stop returns
	<-stopped
	if _, err := b.QueryInt(t.Context(), "", `SELECT 1::bigint`); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("call after Stop: err=%v, want the store closed", err)
	}
}

// TestBatcherIsolatesAFailingCall: a statement the server refuses rolls back
// its batch; it gets its own error, and the other calls run again on their
// own and succeed, their effects committed once.
func TestBatcherIsolatesAFailingCall(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	if _, err := pool.Exec(t.Context(), `CREATE TABLE batch_rows (n int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	b := postgres.NewTestBatcher(pool, 1)
	t.Cleanup(b.Stop)
	release := blockWorkers(t, pool, b)

	const n = 10
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = b.Exec(t.Context(), fmt.Sprint(i), `INSERT INTO batch_rows VALUES ($1)`, i) })
	}
	wg.Go(func() { _, errs[n] = b.QueryInt(t.Context(), "5", `SELECT 1 / 0`) })
	waitFor(t, "all calls to queue", func() bool { return b.Waiting() == n+1 })
	release()
	wg.Wait()

	var pgErr *pgconn.PgError
	if !errors.As(errs[n], &pgErr) || pgErr.Code != "22012" {
		t.Fatalf("failing call: err = %v, want division_by_zero", errs[n])
	}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("call %d: %v", i, errs[i])
		}
	}
	var rows, distinct int
	if err := pool.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT n) FROM batch_rows`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n {
		t.Errorf("rows = %d (%d distinct), want %d", rows, distinct, n)
	}
	if b.Refused() != 1 {
		t.Errorf("refused batches = %d, want 1", b.Refused())
	}
}

// TestBatchersTakeLocksInOneOrder: two batchers (two server processes)
// insert the same unique keys, queued in opposite orders, with a pause
// between the two inserts. Sorted by lock key, the second batch waits for
// the first; unsorted, each would hold one key and wait for the other's
// (a deadlock, which PostgreSQL breaks by refusing one batch).
func TestBatchersTakeLocksInOneOrder(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	if _, err := pool.Exec(t.Context(), `CREATE TABLE batch_keys (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	b1 := postgres.NewTestBatcher(pool, 1)
	b2 := postgres.NewTestBatcher(pool, 1)
	t.Cleanup(b1.Stop)
	t.Cleanup(b2.Stop)
	release := blockWorkers(t, pool, b1, b2)

	insert := `INSERT INTO batch_keys VALUES ($1) ON CONFLICT DO NOTHING`
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	// Calls are queued one at a time: waiting senders are taken first in,
	// first out, so without sorting the batches would keep this order.
	queue := func(b *postgres.TestBatcher, keys ...string) {
		for i, k := range keys {
			if k == "pause" {
				// It sorts between the two keys.
				wg.Go(func() {
					_, err := b.QueryInt(t.Context(), "a~", `SELECT 0::bigint FROM pg_sleep(0.3)`)
					errs <- err
				})
			} else {
				wg.Go(func() { errs <- b.Exec(t.Context(), k, insert, k) })
			}
			waitFor(t, "the call to queue", func() bool { return b.Waiting() == int64(i+1) })
		}
	}
	queue(b1, "a", "pause", "b")
	queue(b2, "b", "pause", "a")
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("call: %v", err)
		}
	}
	if r := b1.Refused() + b2.Refused(); r != 0 {
		t.Errorf("refused batches = %d, want 0 (a deadlock between the batches?)", r)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM batch_keys`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("rows = %d, want 2", n)
	}
}

func openOneWorker(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), pgtest.URL(t), postgres.Options{MaxConns: 8, BatchWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testAction(class classify.Class, key string, now time.Time) *queue.Action {
	a := &queue.Action{ID: queue.NewID(now), Tool: "t", Class: class, IntentKey: key,
		Payload: json.RawMessage(`{"n":1}`), RequestedBy: "agent:a", CreatedAt: now, Channel: "api",
		Spec: classify.Tool{Name: "t", Class: class, ClaimTimeout: time.Minute, ExpiresAfter: time.Hour}}
	switch class {
	case classify.AtMostOnce:
		a.State = queue.StatePending
		exp := now.Add(time.Hour)
		a.ExpiresAt = &exp
	case classify.AtLeastOnce:
		a.State = queue.StateRecorded
		a.FinishedAt = &now
	}
	return a
}

func submittedEv(a *queue.Action) queue.Event {
	return queue.Event{ActionID: a.ID, Kind: queue.EventSubmitted, Actor: a.RequestedBy, Channel: a.Channel, At: a.CreatedAt}
}

// TestMergedCalls: the submissions, token lookups and events of one batch
// each run as one statement, and every caller gets what the single
// statement would have given it: new keys are created, a key held before
// returns its holder, the second of two submissions of one new key gets the
// first as its holder, at-least-once submissions are all recorded, tokens
// are found or not, events are written.
func TestMergedCalls(t *testing.T) {
	t.Parallel()
	s := openOneWorker(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: testAction(classify.AtMostOnce, "held", now), Event: submittedEv(testAction(classify.AtMostOnce, "held", now))})
	held := res.Holder
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TokenCreate(ctx, accounts.TokenCreateParams{Name: "agent-a", Hash: "hash-a", Now: now}); err != nil {
		t.Fatal(err)
	}
	b := s.Batcher()
	release := blockWorkers(t, s.Pool(), b)

	type submitOutcome struct {
		key             string
		holder          *queue.Action
		created, replay bool
		err             error
	}
	keys := []string{"k0", "k1", "k2", "k3", "dup", "dup", "held"}
	subs := make([]submitOutcome, len(keys)+2)
	tokens := make([]error, 3)
	events := make([]error, 3)
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			a := testAction(classify.AtMostOnce, k, now)
			res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a)})
			h, c, r := res.Holder, res.Created, res.ReplayRecorded
			subs[i] = submitOutcome{k, h, c, r, err}
		})
	}
	for i := range 2 {
		wg.Go(func() {
			a := testAction(classify.AtLeastOnce, "log", now)
			res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a)})
			h, c, r := res.Holder, res.Created, res.ReplayRecorded
			subs[len(keys)+i] = submitOutcome{"log", h, c, r, err}
		})
	}
	for i, h := range []string{"hash-a", "hash-a", "hash-unknown"} {
		wg.Go(func() { _, tokens[i] = s.TokenGetByHash(ctx, h) })
	}
	for i := range events {
		wg.Go(func() {
			events[i] = s.EventInsert(ctx, queue.Event{ActionID: held.ID, Kind: queue.EventReplayed, Actor: "agent:a", Channel: "api", At: now})
		})
	}
	calls := int64(len(subs) + len(tokens) + len(events))
	waitFor(t, "all calls to queue", func() bool { return b.Waiting() == calls })
	release()
	wg.Wait()

	if b.Merged() != 3 || b.Refused() != 0 {
		t.Errorf("merged statements = %d, refused batches = %d; want 3 and 0", b.Merged(), b.Refused())
	}
	var dupHolder string
	dupCreated := 0
	for _, o := range subs {
		if o.err != nil {
			t.Fatalf("submit %s: %v", o.key, o.err)
		}
		switch o.key {
		case "held":
			// Same tool and payload text: the statement records the replay.
			if o.created || !o.replay || o.holder.ID != held.ID {
				t.Errorf("held key: created=%v replay recorded=%v holder %s, want the holder %s and a recorded replay", o.created, o.replay, o.holder.ID, held.ID)
			}
		case "dup":
			if o.created {
				dupCreated++
			} else if !o.replay {
				t.Errorf("dup: the second submission's replay was not recorded")
			}
			if dupHolder != "" && o.holder.ID != dupHolder {
				t.Errorf("dup: holders %s and %s", dupHolder, o.holder.ID)
			}
			dupHolder = o.holder.ID
		default:
			if !o.created || o.holder.IntentKey != o.key || o.holder.Attempt != 1 {
				t.Errorf("%s: created=%v key %s attempt %d", o.key, o.created, o.holder.IntentKey, o.holder.Attempt)
			}
		}
	}
	if dupCreated != 1 {
		t.Errorf("dup: %d created, want 1", dupCreated)
	}
	if tokens[0] != nil || tokens[1] != nil || !errors.Is(tokens[2], accounts.ErrNotFound) {
		t.Errorf("token lookups: %v", tokens)
	}
	for i, err := range events {
		if err != nil {
			t.Errorf("event %d: %v", i, err)
		}
	}
	var nActions, nSubmitted, nReplayed, nDupReplayed int
	err = s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM actions),
		(SELECT count(*) FROM events WHERE kind = 'submitted'),
		(SELECT count(*) FROM events WHERE kind = 'replayed' AND action_id = $1),
		(SELECT count(*) FROM events WHERE kind = 'replayed' AND action_id = $2)`, held.ID, dupHolder).Scan(&nActions, &nSubmitted, &nReplayed, &nDupReplayed)
	if err != nil {
		t.Fatal(err)
	}
	// held, k0-k3, dup, two log records: 8 actions, each with one
	// submitted event; held: 3 inserted replay events and the recorded
	// replay; dup: the recorded replay of its second submission.
	if nActions != 8 || nSubmitted != 8 || nReplayed != 4 || nDupReplayed != 1 {
		t.Errorf("actions %d, submitted events %d, replayed events %d and %d; want 8, 8, 4, 1", nActions, nSubmitted, nReplayed, nDupReplayed)
	}
}

// TestMergedCallsFallBack: an event whose data is not JSON breaks its
// merged statement; the batch rolls back and every call runs on its own:
// the bad one fails, an event for an unknown action gets not found (it
// breaks nothing: eventInsertSQL appends only to an action that exists),
// the others succeed once.
func TestMergedCallsFallBack(t *testing.T) {
	t.Parallel()
	s := openOneWorker(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	pre := testAction(classify.AtMostOnce, "pre", now)
	if _, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: pre, Event: submittedEv(pre)}); err != nil {
		t.Fatal(err)
	}
	b := s.Batcher()
	release := blockWorkers(t, s.Pool(), b)
	var wg sync.WaitGroup
	subErrs := make([]error, 3)
	for i := range subErrs {
		a := testAction(classify.AtMostOnce, fmt.Sprint("key-", i), now)
		wg.Go(func() {
			res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a)})
			created := res.Created
			if err == nil && !created {
				err = errors.New("not created")
			}
			subErrs[i] = err
		})
	}
	var badErr, unknownErr error
	wg.Go(func() {
		badErr = s.EventInsert(ctx, queue.Event{ActionID: pre.ID, Kind: queue.EventReplayed, Actor: "agent:a", At: now,
			Data: json.RawMessage(`{"not json`)})
	})
	wg.Go(func() {
		unknownErr = s.EventInsert(ctx, queue.Event{ActionID: queue.NewID(now), Kind: queue.EventReplayed, Actor: "agent:a", At: now})
	})
	waitFor(t, "all calls to queue", func() bool { return b.Waiting() == 5 })
	release()
	wg.Wait()
	if badErr == nil || errors.Is(badErr, queue.ErrNotFound) {
		t.Errorf("event whose data is not JSON: %v, want the database's refusal", badErr)
	}
	if !errors.Is(unknownErr, queue.ErrNotFound) {
		t.Errorf("event for an unknown action: %v, want not found", unknownErr)
	}
	for i, err := range subErrs {
		if err != nil {
			t.Errorf("submission %d: %v", i, err)
		}
	}
	if b.Refused() != 1 {
		t.Errorf("refused batches = %d, want 1", b.Refused())
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM actions`).Scan(&n); err != nil || n != 4 {
		t.Errorf("actions = %d (%v), want 4", n, err)
	}
}

// TestMergedEventsOfUnknownActions: the records of a batch go as one
// statement (eventInsertManySQL); those of an action that does not exist
// are not appended and their calls answer not found, the others are
// appended once, and nothing falls back to one statement a call.
func TestMergedEventsOfUnknownActions(t *testing.T) {
	t.Parallel()
	s := openOneWorker(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	a := testAction(classify.AtMostOnce, "known", now)
	if _, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a)}); err != nil {
		t.Fatal(err)
	}
	b := s.Batcher()
	merged := b.MergedCalls()
	release := blockWorkers(t, s.Pool(), b)
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		id := a.ID
		if i%2 == 1 {
			id = queue.NewID(now.Add(time.Duration(i) * time.Second))
		}
		wg.Go(func() {
			errs[i] = s.EventInsert(ctx, queue.Event{ActionID: id, Kind: queue.EventReplayed, Actor: "agent:a", At: now})
		})
	}
	waitFor(t, "all calls to queue", func() bool { return b.Waiting() == n })
	release()
	wg.Wait()
	for i, err := range errs {
		if i%2 == 1 && !errors.Is(err, queue.ErrNotFound) {
			t.Errorf("record %d, of an unknown action: %v, want not found", i, err)
		}
		if i%2 == 0 && err != nil {
			t.Errorf("record %d: %v", i, err)
		}
	}
	if got := b.MergedCalls() - merged; got != n {
		t.Errorf("calls carried by merged statements = %d, want %d", got, n)
	}
	if b.Refused() != 0 {
		t.Errorf("refused batches = %d, want 0", b.Refused())
	}
	var appended, stray int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE action_id = $1), count(*) FILTER (WHERE action_id <> $1)
		FROM events WHERE kind = 'replayed'`, a.ID).Scan(&appended, &stray); err != nil {
		t.Fatal(err)
	}
	if appended != n/2 || stray != 0 {
		t.Errorf("replayed events: %d of the known action, %d of others; want %d and 0", appended, stray, n/2)
	}
}

// TestMergedSubmissionsCheckTokens: in one merged statement, submissions
// whose token is active are claimed and those whose token was revoked
// claim nothing, read nothing and get unauthorized.
func TestMergedSubmissionsCheckTokens(t *testing.T) {
	t.Parallel()
	s := openOneWorker(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, name := range []string{"live", "gone"} {
		if _, err := s.TokenCreate(ctx, accounts.TokenCreateParams{Name: name, Hash: "hash-" + name, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.TokenRevoke(ctx, accounts.TokenRevokeParams{Name: "gone", Now: now}); err != nil {
		t.Fatal(err)
	}
	held := testAction(classify.AtMostOnce, "held", now)
	if _, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: held, Event: submittedEv(held)}); err != nil {
		t.Fatal(err)
	}
	b := s.Batcher()
	release := blockWorkers(t, s.Pool(), b)
	calls := []struct{ key, hash string }{
		{"a", "hash-live"}, {"b", "hash-gone"}, {"c", "hash-live"}, {"held", "hash-gone"}, {"d", "hash-unknown"},
	}
	type outcome struct {
		created bool
		err     error
	}
	got := make([]outcome, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			a := testAction(classify.AtMostOnce, c.key, now)
			res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a), TokenHash: c.hash})
			created := res.Created
			got[i] = outcome{created, err}
		})
	}
	waitFor(t, "all calls to queue", func() bool { return b.Waiting() == int64(len(calls)) })
	release()
	wg.Wait()
	// The submissions' statement (the refused ones then look their token
	// up, which may be merged too or not).
	if b.Merged() < 1 {
		t.Errorf("merged statements = %d, want at least 1", b.Merged())
	}
	for i, c := range calls {
		if c.hash == "hash-live" {
			if got[i].err != nil || !got[i].created {
				t.Errorf("%s with an active token: created=%v err=%v", c.key, got[i].created, got[i].err)
			}
			continue
		}
		if queue.ErrorCode(got[i].err) != queue.CodeUnauthorized {
			t.Errorf("%s with token %s: err=%v, want unauthorized", c.key, c.hash, got[i].err)
		}
	}
	var actions, events int
	err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM actions), (SELECT count(*) FROM events)`).Scan(&actions, &events)
	if err != nil {
		t.Fatal(err)
	}
	// held, a, c: one submitted event each; the refused replay of held
	// recorded nothing.
	if actions != 3 || events != 3 {
		t.Errorf("actions %d, events %d; want 3 and 3", actions, events)
	}
}

// TestBatcherDropsAbandonedCalls: a call whose caller gave up between
// being gathered into a batch and the batch being sent is not run.
func TestBatcherDropsAbandonedCalls(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	if _, err := pool.Exec(t.Context(), `CREATE TABLE batch_rows (n int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	b := postgres.NewTestBatcher(pool, 1)
	t.Cleanup(b.Stop)
	abandoned, cancel := context.WithCancel(t.Context())
	cancel()
	errs := b.RunBatch([]context.Context{abandoned, t.Context()},
		[]string{`INSERT INTO batch_rows VALUES (1)`, `INSERT INTO batch_rows VALUES (2)`})
	if !errors.Is(errs[0], context.Canceled) || errs[1] != nil {
		t.Fatalf("errors %v, want [context canceled, nil]", errs)
	}
	var n, sum int
	if err := pool.QueryRow(t.Context(), `SELECT count(*), coalesce(sum(n), 0) FROM batch_rows`).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 1 || sum != 2 {
		t.Errorf("%d rows summing to %d, want only row 2: the abandoned insert must not run", n, sum)
	}
}

// TestHintedReplayLookup: a key this process saw held is resubmitted
// through the lookup statement, which answers exactly what the claiming
// statement would (the holder, no new row, the replay recorded; merged when
// several wait together); a key released since falls through to the claim
// and gets a new attempt; a revoked token is refused either way; an
// at-least-once submission never looks up.
func TestHintedReplayLookup(t *testing.T) {
	t.Parallel()
	s := openOneWorker(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := s.TokenCreate(ctx, accounts.TokenCreateParams{Name: "live", Hash: "hash-live", Now: now}); err != nil {
		t.Fatal(err)
	}
	var held []*queue.Action
	for _, k := range []string{"k1", "k2"} {
		a := testAction(classify.AtMostOnce, k, now)
		res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a)})
		h, created := res.Holder, res.Created
		if err != nil || !created {
			t.Fatalf("submit %s: created=%v err=%v", k, created, err)
		}
		held = append(held, h)
	}
	if found, missed, hinted := s.ReplayLookups(); found != 0 || missed != 0 || hinted != 2 {
		t.Fatalf("after two claims: found %d missed %d hinted %d, want 0 0 2", found, missed, hinted)
	}

	// Four replays queued together: one merged lookup statement.
	b := s.Batcher()
	release := blockWorkers(t, s.Pool(), b)
	keys := []string{"k1", "k2", "k1", "k2"}
	type outcome struct {
		holder          *queue.Action
		created, replay bool
		err             error
	}
	got := make([]outcome, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			a := testAction(classify.AtMostOnce, k, now)
			res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a), TokenHash: "hash-live"})
			h, c, r := res.Holder, res.Created, res.ReplayRecorded
			got[i] = outcome{h, c, r, err}
		})
	}
	waitFor(t, "the replays to queue", func() bool { return b.Waiting() == int64(len(keys)) })
	release()
	wg.Wait()
	if b.Merged() != 1 || b.Refused() != 0 {
		t.Errorf("merged statements %d, refused batches %d; want 1 and 0", b.Merged(), b.Refused())
	}
	for i, o := range got {
		want := held[i%2]
		if o.err != nil || o.created || !o.replay || o.holder.ID != want.ID || o.holder.State != queue.StatePending {
			t.Errorf("replay %d of %s: holder %v created=%v replay=%v err=%v; want pending holder %s, replay recorded",
				i, keys[i], o.holder, o.created, o.replay, o.err, want.ID)
		}
	}
	if found, missed, _ := s.ReplayLookups(); found != 4 || missed != 0 {
		t.Errorf("lookups found %d missed %d, want 4 and 0", found, missed)
	}
	countEvents := func(id, kind string) int {
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE action_id = $1 AND kind = $2`, id, kind).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, h := range held {
		if n := countEvents(h.ID, queue.EventReplayed); n != 2 {
			t.Errorf("%s: %d replayed events, want 2", h.IntentKey, n)
		}
	}

	// A different payload under a held key: the holder comes back with no
	// replay recorded (the Service decides), as from the claiming statement.
	other := testAction(classify.AtMostOnce, "k1", now)
	other.Payload = []byte(`{"n":2}`)
	res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: other, Event: submittedEv(other)})
	h, created, replay := res.Holder, res.Created, res.ReplayRecorded
	if err != nil || created || replay || h.ID != held[0].ID {
		t.Errorf("other payload: holder %v created=%v replay=%v err=%v, want the holder and nothing recorded", h, created, replay, err)
	}

	// A revoked token: the lookup finds nothing it may show, the claim
	// refuses, and the caller learns why.
	if err := s.TokenRevoke(ctx, accounts.TokenRevokeParams{Name: "live", Now: now}); err != nil {
		t.Fatal(err)
	}
	a := testAction(classify.AtMostOnce, "k2", now)
	if _, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a), TokenHash: "hash-live"}); queue.ErrorCode(err) != queue.CodeUnauthorized {
		t.Errorf("replay with a revoked token: err=%v, want unauthorized", err)
	}

	// Released since (expired): the hint is stale, the claim takes over.
	if _, err := s.ActionExpireDue(ctx, queue.ExpiryDue(now.Add(2*time.Hour), 10)); err != nil {
		t.Fatal(err)
	}
	a = testAction(classify.AtMostOnce, "k1", now)
	res, err = s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a)})
	h, created = res.Holder, res.Created
	if err != nil || !created || h.Attempt != 2 {
		t.Fatalf("resubmit after expiry: created=%v attempt=%v err=%v, want a new attempt 2", created, h.Attempt, err)
	}
	found, missed, _ := s.ReplayLookups()
	if missed != 2 {
		t.Errorf("lookups missed %d, want 2 (the revoked token and the expired key)", missed)
	}

	// At-least-once submissions are recorded every time, never looked up.
	for range 2 {
		a := testAction(classify.AtLeastOnce, "log", now)
		if res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a)}); err != nil || !res.Created {
			t.Fatalf("at-least-once: created=%v err=%v", res.Created, err)
		}
	}
	if f, m, _ := s.ReplayLookups(); f != found || m != missed {
		t.Errorf("at-least-once submissions were looked up: found %d->%d, missed %d->%d", found, f, missed, m)
	}
}

// TestBatchesUseGenericPlans: the batches' statements run on connections
// that always use generic plans (re-planning the replay lookup on every
// call cost more than running it); the store's other queries keep the
// server's default.
func TestBatchesUseGenericPlans(t *testing.T) {
	t.Parallel()
	s := openOneWorker(t)
	const q = `SELECT (current_setting('plan_cache_mode') = 'force_generic_plan')::int::bigint`
	generic, err := s.Batcher().QueryInt(t.Context(), "", q)
	if err != nil {
		t.Fatal(err)
	}
	if generic != 1 {
		t.Error("a batch ran without plan_cache_mode = force_generic_plan")
	}
	var other int64
	if err := s.Pool().QueryRow(t.Context(), q).Scan(&other); err != nil {
		t.Fatal(err)
	}
	if other != 0 {
		t.Error("the store's own pool forces generic plans too; only the batches should")
	}
}

// TestLazyBatches: a batch of lazy writes (replay records) and reads
// commits with synchronous_commit off, for that transaction only; one
// durable call makes the whole batch wait for its flush.
func TestLazyBatches(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	b := postgres.NewTestBatcher(pool, 1)
	t.Cleanup(b.Stop)
	const setting = `SELECT current_setting('synchronous_commit')`

	// Alone, under no load: a batch of one. A read alone has nothing to
	// flush and pays for no setting.
	for kind, want := range map[string]string{"lazy": "off", "read": "on", "durable": "on"} {
		if got, err := b.QueryText(t.Context(), "", setting, kind); err != nil || got != want {
			t.Fatalf("a %s call alone ran with synchronous_commit = %q (%v), want %s", kind, got, err, want)
		}
	}

	for _, tc := range []struct {
		name  string
		kinds []string
		want  string
	}{
		{"all lazy", []string{"lazy", "lazy", "lazy"}, "off"},
		{"lazy writes and reads", []string{"read", "lazy", "read"}, "off"},
		{"reads only", []string{"read", "read"}, "on"},
		{"one durable", []string{"lazy", "durable", "read"}, "on"},
	} {
		release := blockWorkers(t, pool, b)
		got := make([]string, len(tc.kinds))
		errs := make([]error, len(tc.kinds))
		var wg sync.WaitGroup
		for i, kind := range tc.kinds {
			wg.Go(func() { got[i], errs[i] = b.QueryText(t.Context(), fmt.Sprint(i), setting, kind) })
		}
		waitFor(t, "all calls to queue", func() bool { return b.Waiting() == int64(len(tc.kinds)) })
		release()
		wg.Wait()
		for i := range got {
			if errs[i] != nil || got[i] != tc.want {
				t.Errorf("%s: call %d ran with synchronous_commit = %q (%v), want %s", tc.name, i, got[i], errs[i], tc.want)
			}
		}
	}

	// The setting ends with its transaction: no connection keeps it.
	conns := make([]*pgxpool.Conn, 0, 4)
	for range cap(conns) {
		c, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var s string
		if err := c.QueryRow(t.Context(), setting).Scan(&s); err != nil || s != "on" {
			t.Errorf("a connection kept synchronous_commit = %q (%v) after a lazy batch", s, err)
		}
	}
	for _, c := range conns {
		c.Release()
	}
}

// TestTransitionsShareACommit: transitions queued together (agents
// cancelling, completing, failing at once) run in one transaction: one
// commit and one WAL flush for all of them. Each caller gets its action as
// it is after its own statement; the second of two moves of one action
// finds it moved by the first (ErrStateMismatch, the current state), and
// its batch-mates commit regardless.
func TestTransitionsShareACommit(t *testing.T) {
	t.Parallel()
	s := openOneWorker(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	const n = 6
	ids := make([]string, n)
	for i := range n {
		a := testAction(classify.AtMostOnce, fmt.Sprintf("tx-%d", i), now)
		if res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a)}); err != nil || !res.Created {
			t.Fatalf("submit %d: created=%v err=%v", i, res.Created, err)
		}
		ids[i] = a.ID
	}
	tb := s.TransitionBatcher()
	release := blockWorkers(t, s.Pool(), tb)
	type outcome struct {
		a   *queue.Action
		err error
	}
	got := make([]outcome, n+1)
	var wg sync.WaitGroup
	for i := range n + 1 {
		id := ids[i%n] // the last call moves action 0 again
		wg.Go(func() {
			a, err := s.ActionTransition(ctx, queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StatePending},
				To: queue.StateCancelled, Now: now, FinishedAt: &now,
				Event: queue.Event{ActionID: id, Kind: queue.EventCancelled, Actor: "agent:a", Channel: "api", At: now}})
			got[i] = outcome{a, err}
		})
	}
	waitFor(t, "the transitions to queue", func() bool { return tb.Waiting() == n+1 })
	release()
	wg.Wait()
	mismatches := 0
	for i, o := range got {
		if errors.Is(o.err, queue.ErrStateMismatch) {
			mismatches++
			if i%n != 0 {
				t.Errorf("transition %d of a fresh action: %v", i, o.err)
			}
		} else if o.err != nil {
			t.Errorf("transition %d: %v", i, o.err)
			continue
		}
		if o.a == nil || o.a.ID != ids[i%n] || o.a.State != queue.StateCancelled {
			t.Errorf("transition %d answered %+v, want action %s cancelled", i, o.a, ids[i%n])
		}
	}
	if mismatches != 1 {
		t.Errorf("%d transitions found their action moved, want 1 (the second move of action 0)", mismatches)
	}
	var events, txs int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM events WHERE kind = $1`, queue.EventCancelled).Scan(&events, &txs); err != nil {
		t.Fatal(err)
	}
	if events != n || txs != 1 {
		t.Errorf("%d cancel events in %d transactions, want %d in 1", events, txs, n)
	}
	if tb.Refused() != 0 {
		t.Errorf("refused batches = %d, want 0", tb.Refused())
	}
}

// TestBatcherWaitsForATakenCall: a caller whose context ends while its call
// runs gets the call's true outcome, not its deadline: an error must mean
// "not written" (an executor told its claim timed out skips the delivery,
// so the claim must not commit behind its back).
func TestBatcherWaitsForATakenCall(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t).Pool()
	b := postgres.NewTestBatcher(pool, 1)
	t.Cleanup(b.Stop)
	key, unlock := holdAdvisoryLock(t, pool)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	type outcome struct {
		n   int64
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		n, err := b.QueryInt(ctx, "", `SELECT 7::bigint FROM pg_advisory_xact_lock($1)`, key)
		done <- outcome{n, err}
	}()
	waitLockWaiters(t, pool, key, 1)
	<-ctx.Done()
	select {
	case o := <-done:
		t.Fatalf("the caller returned (%d, %v) while its call still ran", o.n, o.err)
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	if o := <-done; o.err != nil || o.n != 7 {
		t.Fatalf("after its deadline the caller got (%d, %v), want the call's outcome 7", o.n, o.err)
	}
}

// TestMergedReports: the agents' completes and fails of one batch run as
// one statement (reportManySQL), and each caller gets what its transition
// alone would have given it. The same reports run once merged and once one
// at a time, on two sets of actions alike, and their answers, events and
// tickets must match: a report with a live token, one without a token, one
// with a revoked token, one of another agent's claim, two of one action,
// and a late one that resolves its stale ticket.
func TestMergedReports(t *testing.T) {
	t.Parallel()
	s := openOneWorker(t)
	s.MergeReports() // the table is small; see TestReportsMergeOnlyWithStatistics
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, tok := range []string{"hash-live", "hash-revoked"} {
		if _, err := s.TokenCreate(ctx, accounts.TokenCreateParams{Name: tok, Hash: tok, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.TokenRevoke(ctx, accounts.TokenRevokeParams{Name: "hash-revoked", Now: now}); err != nil {
		t.Fatal(err)
	}
	type report struct {
		action, agent, token string
		fail                 bool
	}
	reports := []report{
		{action: "live", agent: "agent:a", token: "hash-live"},
		{action: "untokened", agent: "agent:a", fail: true},
		{action: "revoked", agent: "agent:a", token: "hash-revoked"},
		{action: "others", agent: "agent:a"},
		{action: "twice", agent: "agent:a"},
		{action: "twice", agent: "agent:a"},
		{action: "late", agent: "agent:a", fail: true},
	}
	// claim makes one set of the actions the reports name, all claimed by
	// agent:a but "others" (agent:b); "late" is past its deadline with a
	// stale ticket open.
	claim := func(set string) map[string]string {
		ids := map[string]string{}
		for _, name := range []string{"live", "untokened", "revoked", "others", "twice", "late"} {
			a := testAction(classify.ExactlyOnce, set+":"+name, now)
			a.State, a.RequestedBy = queue.StateInProgress, "agent:a"
			if name == "others" {
				a.RequestedBy = "agent:b"
			}
			at := now
			if name == "late" {
				at = now.Add(-time.Hour)
			}
			a.ClaimedAt, a.ClaimedBy = &at, &a.RequestedBy
			if res, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a)}); err != nil || !res.Created {
				t.Fatalf("claim %s: created=%v err=%v", a.IntentKey, res.Created, err)
			}
			ids[name] = a.ID
		}
		return ids
	}
	run := func(ids map[string]string, r report) (*queue.Action, error) {
		p := queue.ActionTransitionParams{ID: ids[r.action], From: []queue.State{queue.StateInProgress}, To: queue.StateDone,
			Now: now, FinishedAt: &now, RequestedBy: r.agent, AgentExecuted: true, TokenHash: r.token,
			Event: queue.Event{ActionID: ids[r.action], Kind: queue.EventCompleted, Actor: r.agent, Channel: "api", At: now}}
		if r.fail {
			msg := "declined"
			p.To, p.Error, p.Event.Kind, p.Event.Data = queue.StateFailed, &msg, queue.EventFailed, json.RawMessage(`{"error":"declined"}`)
		} else {
			p.Result, p.Event.Data = json.RawMessage(`{"refund":"re_1"}`), json.RawMessage(`{"refund":"re_1"}`)
		}
		p.ResolveStale = queue.LateResolution(p.Event, p.To, queue.LateReportNote)
		return s.ActionTransition(ctx, p)
	}
	alone, merged := claim("alone"), claim("merged")
	if opened, err := s.TicketOpenStale(ctx, queue.StaleDue(now, 10)); err != nil || len(opened) != 2 {
		t.Fatalf("stale tickets: %d, %v; want 2 (one per set)", len(opened), err)
	}

	type outcome struct {
		state, result, error, ticket string
		err                          string
	}
	show := func(a *queue.Action, err error) outcome {
		var o outcome
		if err != nil {
			o.err = err.Error()
			for name, id := range merged { // the same error names the other set's id
				o.err = strings.ReplaceAll(o.err, id, name)
			}
			for name, id := range alone {
				o.err = strings.ReplaceAll(o.err, id, name)
			}
		}
		if a != nil {
			o.state, o.result = string(a.State), string(a.Result)
			if a.Error != nil {
				o.error = *a.Error
			}
			if a.Ticket != nil {
				o.ticket = string(a.Ticket.State)
				if a.Ticket.Outcome != nil {
					o.ticket += " " + string(*a.Ticket.Outcome)
				}
			}
		}
		return o
	}
	want := make([]outcome, len(reports))
	for i, r := range reports {
		want[i] = show(run(alone, r))
	}
	tb := s.TransitionBatcher()
	mergedBefore, carriedBefore := tb.Merged(), tb.MergedCalls()
	release := blockWorkers(t, s.Pool(), tb)
	got := make([]outcome, len(reports))
	var wg sync.WaitGroup
	for i, r := range reports {
		wg.Go(func() { got[i] = show(run(merged, r)) })
	}
	waitFor(t, "the reports to queue", func() bool { return tb.Waiting() == int64(len(reports)) })
	release()
	wg.Wait()
	if n, c := tb.Merged()-mergedBefore, tb.MergedCalls()-carriedBefore; n != 1 || c != int64(len(reports)) || tb.Refused() != 0 {
		t.Errorf("merged statements = %d carrying %d reports, refused batches = %d; want 1 carrying %d, and 0", n, c, tb.Refused(), len(reports))
	}
	// The two reports of "twice" race in the merged batch: either may be
	// the one that moved it; the other reads it done with the same result.
	if got[4] != got[5] && got[4] == want[5] && got[5] == want[4] {
		got[4], got[5] = got[5], got[4]
	}
	for i, r := range reports {
		if got[i] != want[i] {
			t.Errorf("report %d (%+v): merged %+v, alone %+v", i, r, got[i], want[i])
		}
	}
	// The same events and tickets on both sets.
	ticketID := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	history := func(ids map[string]string) string {
		var b strings.Builder
		for _, name := range []string{"live", "untokened", "revoked", "others", "twice", "late"} {
			rows, err := s.Pool().Query(ctx, `SELECT kind, actor, channel, coalesce(data::text, '') FROM events WHERE action_id = $1 ORDER BY id`, ids[name])
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var kind, actor, channel, data string
				if err := rows.Scan(&kind, &actor, &channel, &data); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&b, "%s: %s %s %s %s\n", name, kind, actor, channel, ticketID.ReplaceAllString(data, "TICKET"))
			}
			rows.Close()
			var tickets string
			if err := s.Pool().QueryRow(ctx, `SELECT coalesce(string_agg(state || ' ' || coalesce(outcome, '') || ' ' || coalesce(resolved_by, ''), ','), '') FROM tickets WHERE action_id = $1`, ids[name]).Scan(&tickets); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s tickets: %s\n", name, tickets)
		}
		return b.String()
	}
	if h, w := history(merged), history(alone); h != w {
		t.Errorf("merged reports left\n%s\nalone\n%s", h, w)
	}
	if !strings.Contains(history(merged), "late tickets: resolved failed agent:a") {
		t.Errorf("the late report did not resolve its stale ticket:\n%s", history(merged))
	}
}

// TestReportsMergeOnlyWithStatistics: reports are merged only once the
// planner's statistics count a table of some size (reportMerging): before
// the first ANALYZE, and after one of a small table, they run one by one;
// after an ANALYZE of 10,000 actions, they merge, and the merged
// statement's generic plan then probes the primary key.
func TestReportsMergeOnlyWithStatistics(t *testing.T) {
	t.Parallel()
	s := openOneWorker(t)
	ctx := t.Context()
	if s.MergesReports() {
		t.Error("reports merge before the table was ever analyzed")
	}
	seed := func(n int) {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload,
			requested_by, channel, created_at, finished_at, spec)
			SELECT gen_random_uuid(), 't', 'at-least-once', '', 1, 'recorded', '{}', 'agent:a', 'api', now(), now(), '{}'
			FROM generate_series(1, $1)`, n); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool().Exec(ctx, `ANALYZE actions`); err != nil {
			t.Fatal(err)
		}
	}
	seed(100)
	if s.MergesReports() {
		t.Error("reports merge with statistics of 100 actions")
	}
	seed(10_000)
	if !s.MergesReports() {
		t.Fatal("reports do not merge with statistics of 10,100 actions")
	}
	var plan string
	err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+postgres.ReportManySQL, []string{}, []string{}, []time.Time{},
			[]*string{}, []*string{}, []string{}, []*string{}, []string{}, []string{}, []string{}, []*string{}, []bool{},
			[]string{}, []time.Time{}, []string{}, []string{}, []string{}, []*string{}, []string{"in_progress"}).Scan(&plan)
	})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []map[string]any
	if err := json.Unmarshal([]byte(plan), &nodes); err != nil {
		t.Fatal(err)
	}
	var scans []string // "node type on relation (index)" of every scan of actions
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Relation Name"] == "actions" && n["Node Type"] != "ModifyTable" {
			scans = append(scans, fmt.Sprintf("%v (%v)", n["Node Type"], n["Index Name"]))
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(nodes[0]["Plan"].(map[string]any))
	if len(scans) != 1 || scans[0] != "Index Scan (actions_pkey)" {
		t.Errorf("the merged reports' generic plan reads actions by %v, want one Index Scan (actions_pkey):\n%s", scans, plan)
	}
}

// TestServiceReportsMerge: the completes and fails the Service makes are
// the reports reportManySQL merges (reportable), so that a change to what
// the Service asks of a transition shows here rather than quietly sending
// every report alone.
func TestServiceReportsMerge(t *testing.T) {
	t.Parallel()
	e := apptest.NewEnv(t, apptest.EnvOptions{})
	s := e.Store.(*postgres.Store)
	s.MergeReports()
	ctx := t.Context()
	var ids []string
	for i := range 4 {
		a := apptest.Submit(t, e.Service, "issue_refund", map[string]any{"order_id": "o-merge", "line_id": fmt.Sprint(i), "amount": 1, "currency": "EUR"})
		if a.State != queue.StateInProgress {
			t.Fatalf("claim %d: %s", i, a.State)
		}
		ids = append(ids, a.ID)
	}
	tb := s.TransitionBatcher()
	before, carriedBefore := tb.Merged(), tb.MergedCalls()
	release := blockWorkers(t, s.Pool(), tb)
	var wg sync.WaitGroup
	got := make([]queue.State, len(ids))
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Go(func() {
			var res queue.DriveResult
			if i%2 == 0 {
				res, errs[i] = e.Service.Complete(ctx, id, "bot", json.RawMessage(`{"refund":"re_1"}`), "api")
			} else {
				res, errs[i] = e.Service.Fail(ctx, id, "bot", "declined", "api")
			}
			if res.Action != nil {
				got[i] = res.Action.State
			}
		})
	}
	waitFor(t, "the reports to queue", func() bool { return tb.Waiting() == int64(len(ids)) })
	release()
	wg.Wait()
	for i := range ids {
		want := queue.StateDone
		if i%2 == 1 {
			want = queue.StateFailed
		}
		if errs[i] != nil || got[i] != want {
			t.Errorf("report %d: %s, %v; want %s", i, got[i], errs[i], want)
		}
	}
	if n, c := tb.Merged()-before, tb.MergedCalls()-carriedBefore; n != 1 || c != int64(len(ids)) {
		t.Errorf("merged statements = %d carrying %d reports, want 1 carrying %d: the Service's reports are not reportable", n, c, len(ids))
	}
}
