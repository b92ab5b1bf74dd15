package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// openWith opens a store with cfg; the test closes it (Close is idempotent
// for the writer, so a test may close it earlier to reopen the file).
func openWith(t *testing.T, path string, cfg config) *Store {
	t.Helper()
	if cfg.maxBatch == 0 {
		cfg.maxBatch = defaultMaxBatch
	}
	if cfg.synchronous == "" {
		cfg.synchronous = "FULL"
	}
	s, err := open(t.Context(), path, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// setSetting writes key=value in a write call of its own.
func setSetting(ctx context.Context, s *Store, key, value string) error {
	return s.withTx(ctx, func(ctx context.Context, q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES (?, ?)`, key, value)
		return err
	})
}

// hasSetting reports whether key is stored.
func hasSetting(t *testing.T, s *Store, key string) bool {
	t.Helper()
	_, err := s.SettingGet(t.Context(), key)
	if errors.Is(err, accounts.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("get setting %s: %v", key, err)
	}
	return true
}

// holdWriter occupies the writer with a call that waits for release, so
// that the calls made meanwhile queue up and make the next batch, together.
func holdWriter(t *testing.T, s *Store) (release func(), done <-chan error) {
	t.Helper()
	started, free := make(chan struct{}), make(chan struct{})
	ch := make(chan error, 1)
	go func() {
		ch <- s.withTx(context.Background(), func(ctx context.Context, q querier) error {
			close(started)
			<-free
			_, err := q.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('holder', 'x') ON CONFLICT (key) DO NOTHING`)
			return err
		})
	}()
	<-started
	return sync.OnceFunc(func() { close(free) }), ch
}

// waitQueued waits until n calls wait for the writer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.w.mu.Lock()
		got := len(s.w.queue)
		s.w.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Many goroutines submit distinct keys and a few shared keys at once:
// every shared key gets exactly one holder that all its submitters see,
// writes are committed in groups, and every acknowledged submission is in
// the file after it is reopened.
func TestWriterConcurrentSubmissions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	s := openWith(t, path, config{})
	const (
		distinct = 150
		shared   = 5  // keys
		perKey   = 20 // submitters of each
	)
	type result struct {
		key     string
		holder  *queue.Action
		created bool
		err     error
	}
	results := make([]result, distinct+shared*perKey)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		key := fmt.Sprintf("distinct:%d", i)
		if i >= distinct {
			key = fmt.Sprintf("shared:%d", (i-distinct)%shared)
		}
		wg.Go(func() {
			<-start
			now := t0.Add(time.Duration(i) * time.Millisecond)
			a := claim(key, now)
			if i%2 == 1 {
				a.Class, a.State, a.ClaimedAt = classify.AtMostOnce, queue.StatePending, nil
			}
			r := result{key: key}
			var res queue.ActionSubmitResult
			res, r.err = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submitEvent(a)})
			r.holder, r.created = res.Holder, res.Created
			results[i] = r
		})
	}
	close(start)
	wg.Wait()

	created := map[string]string{} // key -> id of its creator
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("submitter %d (%s): %v", i, r.key, r.err)
		}
		if r.created {
			if id, dup := created[r.key]; dup {
				t.Fatalf("%s: created twice (%s and %s)", r.key, id, r.holder.ID)
			}
			created[r.key] = r.holder.ID
		}
	}
	if len(created) != distinct+shared {
		t.Fatalf("%d keys created, want %d", len(created), distinct+shared)
	}
	for i, r := range results {
		if r.holder.ID != created[r.key] {
			t.Fatalf("submitter %d (%s) sees holder %s, want %s", i, r.key, r.holder.ID, created[r.key])
		}
	}
	st := s.BatchStats()
	if st.Calls <= st.Batches {
		t.Errorf("%d writes in %d commits: no write shared a commit", st.Calls, st.Batches)
	}
	t.Logf("%d writes in %d commits, %d groups rerun call by call", st.Calls, st.Batches, st.Refused)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := openWith(t, path, config{})
	for key, id := range created {
		a, err := r.ActionGetByID(t.Context(), id)
		if err != nil {
			t.Fatalf("%s: acknowledged %s, after reopening: %v", key, id, err)
		}
		if a.IntentKey != key {
			t.Fatalf("%s: stored as %s", id, a.IntentKey)
		}
	}
	n, err := r.ActionList(t.Context(), queue.ActionListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(n) != distinct+shared {
		t.Fatalf("%d actions stored, want %d", len(n), distinct+shared)
	}
}

// Calls refused in a group (by the caller's own error after writing, or by
// a constraint) leave no trace and do not undo their group-mates, which
// commit with them in one transaction.
func TestWriterFailingCallKeepsGroupMates(t *testing.T) {
	t.Parallel()
	s := openWith(t, filepath.Join(t.TempDir(), "a.db"), config{})
	if err := setSetting(t.Context(), s, "taken", "x"); err != nil {
		t.Fatal(err)
	}
	before := s.BatchStats()
	release, held := holdWriter(t, s)
	refused := errors.New("refused by the caller")
	calls := map[string]writeFunc{
		"ok:1": nil,
		"refuse": func(ctx context.Context, q querier) error {
			if _, err := q.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('refuse', 'x')`); err != nil {
				return err
			}
			return refused
		},
		"ok:2": nil,
		"constraint": func(ctx context.Context, q querier) error {
			if _, err := q.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('constraint', 'x')`); err != nil {
				return err
			}
			_, err := q.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('taken', 'y')`)
			return err
		},
		"ok:3": nil,
	}
	errs := make(map[string]error)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for key, fn := range calls {
		if fn == nil {
			fn = func(ctx context.Context, q querier) error {
				_, err := q.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES (?, 'x')`, key)
				return err
			}
		}
		wg.Go(func() {
			err := s.withTx(t.Context(), fn)
			mu.Lock()
			errs[key] = err
			mu.Unlock()
		})
	}
	waitQueued(t, s, len(calls))
	release()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs["refuse"], refused) {
		t.Errorf("refusing call: %v, want its own error", errs["refuse"])
	}
	if !isUniqueViolation(errs["constraint"]) {
		t.Errorf("call violating a constraint: %v, want the violation", errs["constraint"])
	}
	for _, key := range []string{"ok:1", "ok:2", "ok:3", "holder"} {
		if errs[key] != nil {
			t.Errorf("%s: %v", key, errs[key])
		}
		if !hasSetting(t, s, key) {
			t.Errorf("%s: acknowledged, not stored", key)
		}
	}
	for _, key := range []string{"refuse", "constraint"} {
		if hasSetting(t, s, key) {
			t.Errorf("%s: refused, yet its first insert is stored", key)
		}
	}
	if v, _ := s.SettingGet(t.Context(), "taken"); v != "x" {
		t.Errorf("taken = %q, want x", v)
	}
	after := s.BatchStats()
	if b, c, r := after.Batches-before.Batches, after.Calls-before.Calls, after.Refused-before.Refused; b != 2 || c != 6 || r != 0 {
		t.Errorf("%d commits of %d calls, %d groups rerun; want the holder alone, then one group of 5, none rerun", b, c, r)
	}
}

// cancelCaller is what the SQL function test_cancel_caller() calls.
var cancelCaller atomic.Pointer[context.CancelFunc]

func init() {
	sqlite.MustRegisterScalarFunction("test_cancel_caller", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		if f := cancelCaller.Swap(nil); f != nil {
			(*f)()
			// Let the driver's watcher see the cancellation, so that an
			// interrupt, if the statement ran with the caller's context,
			// arrives while it still runs.
			time.Sleep(20 * time.Millisecond)
		}
		return int64(1), nil
	})
}

// A caller whose context is cancelled while its call runs inside a group
// (in the middle of a long insert) spoils nothing: the statement does not
// run with the caller's context, so SQLite is not interrupted (an
// interrupted insert rolls back the whole transaction), and the group
// commits together.
func TestWriterCancelledCallerMidGroup(t *testing.T) {
	t.Parallel()
	s := openWith(t, filepath.Join(t.TempDir(), "a.db"), config{})
	before := s.BatchStats()
	release, held := holdWriter(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cancelCaller.Store(&cancel)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = setSetting(t.Context(), s, "before", "x") })
	waitQueued(t, s, 1)
	wg.Go(func() {
		errs[1] = s.withTx(ctx, func(ctx context.Context, q querier) error {
			// A write of many rows; the first one cancels the caller.
			_, err := q.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
				INSERT INTO settings (key, value) SELECT 'cancelled:' || i, test_cancel_caller() FROM n`)
			return err
		})
	})
	waitQueued(t, s, 2)
	wg.Go(func() { errs[2] = setSetting(t.Context(), s, "after", "x") })
	waitQueued(t, s, 3)
	release()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatal("the caller was not cancelled: the test did not test anything")
	}
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("group-mates of the cancelled caller: %v, %v", errs[0], errs[2])
	}
	for _, key := range []string{"holder", "before", "after"} {
		if !hasSetting(t, s, key) {
			t.Errorf("%s: acknowledged, not stored", key)
		}
	}
	// The cancelled caller's call had started: it waited for, and got, its
	// true outcome.
	if errs[1] != nil {
		t.Errorf("cancelled caller: %v, want its outcome (it committed)", errs[1])
	}
	if errs[1] == nil && !hasSetting(t, s, "cancelled:20000") {
		t.Error("the cancelled caller was answered with success, its rows are not stored")
	}
	after := s.BatchStats()
	if r := after.Refused - before.Refused; r != 0 {
		t.Errorf("%d groups rerun call by call: the cancellation spoiled the group", r)
	}
}

// A caller that gives up while its call waits is not run at all.
func TestWriterDropsCallsCancelledBeforeTheirGroup(t *testing.T) {
	t.Parallel()
	s := openWith(t, filepath.Join(t.TempDir(), "a.db"), config{})
	release, held := holdWriter(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	var ran atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- s.withTx(ctx, func(context.Context, querier) error {
			ran.Store(true)
			return nil
		})
	}()
	waitQueued(t, s, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiting call: %v", err)
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	// A call after it proves the writer went on (and past the dropped one).
	if err := setSetting(t.Context(), s, "next", "x"); err != nil {
		t.Fatal(err)
	}
	if ran.Load() {
		t.Fatal("a call cancelled before its group started was run")
	}
}

// Results are handed out only once the group's COMMIT returned: while it
// runs, no caller has been answered; if it fails, every caller hears an
// error (run again alone, a call whose own COMMIT fails too hears it), and
// nothing is stored.
func TestWriterAnswersAfterCommit(t *testing.T) {
	t.Parallel()
	var (
		failAll    atomic.Bool
		committing = make(chan int, 10)
		proceed    = make(chan struct{})
		gate       atomic.Bool
	)
	s := openWith(t, filepath.Join(t.TempDir(), "a.db"), config{commitHook: func(calls int) error {
		if gate.Load() && calls > 1 {
			committing <- calls
			<-proceed
		}
		if failAll.Load() {
			return errors.New("commit failed (test hook)")
		}
		return nil
	}})
	run := func(prefix string, n int) []chan error {
		release, held := holdWriter(t, s)
		answers := make([]chan error, n)
		for i := range answers {
			answers[i] = make(chan error, 1)
			go func() { answers[i] <- setSetting(t.Context(), s, fmt.Sprintf("%s:%d", prefix, i), "x") }()
		}
		waitQueued(t, s, n)
		release()
		if err := <-held; err != nil && !failAll.Load() {
			t.Fatal(err)
		}
		return answers
	}

	// A failing check must not leave the writer waiting in the hook.
	letCommit := sync.OnceFunc(func() { close(proceed) })
	defer letCommit()
	gate.Store(true)
	answers := run("ok", 4)
	if calls := <-committing; calls != 4 {
		t.Fatalf("a group of %d, want 4", calls)
	}
	time.Sleep(20 * time.Millisecond) // an early answer would arrive now
	for i, ch := range answers {
		select {
		case err := <-ch:
			t.Fatalf("caller %d answered (%v) before its group committed", i, err)
		default:
		}
	}
	letCommit()
	for i, ch := range answers {
		if err := <-ch; err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		if !hasSetting(t, s, fmt.Sprintf("ok:%d", i)) {
			t.Fatalf("ok:%d: acknowledged, not stored", i)
		}
	}
	gate.Store(false)

	failAll.Store(true)
	before := s.BatchStats()
	answers = run("failed", 4)
	for i, ch := range answers {
		if err := <-ch; err == nil {
			t.Errorf("caller %d: success, though every COMMIT failed", i)
		}
	}
	failAll.Store(false)
	for i := range answers {
		if hasSetting(t, s, fmt.Sprintf("failed:%d", i)) {
			t.Errorf("failed:%d stored, though its COMMIT failed", i)
		}
	}
	if r := s.BatchStats().Refused - before.Refused; r != 1 {
		t.Errorf("%d groups rerun call by call, want 1", r)
	}
}

// A real failing COMMIT: one call defers its foreign key check to the end
// of the transaction and breaks it, so SQLite refuses the group's COMMIT
// (and leaves the transaction open). The group is rolled back and each
// call runs again alone: the breaking one fails, the others commit.
func TestWriterCommitRefusedRerunsAlone(t *testing.T) {
	t.Parallel()
	s := openWith(t, filepath.Join(t.TempDir(), "a.db"), config{})
	before := s.BatchStats()
	release, held := holdWriter(t, s)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = setSetting(t.Context(), s, "first", "x") })
	waitQueued(t, s, 1)
	wg.Go(func() {
		errs[1] = s.withTx(t.Context(), func(ctx context.Context, q querier) error {
			if _, err := q.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
				return err
			}
			if _, err := q.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('breaking', 'x')`); err != nil {
				return err
			}
			_, err := q.ExecContext(ctx, `INSERT INTO events (action_id, kind, actor, channel, at) VALUES ('no-such-action', 'note', 'test', 'api', ?)`,
				fmtTime(t0))
			return err
		})
	})
	waitQueued(t, s, 2)
	wg.Go(func() { errs[2] = setSetting(t.Context(), s, "last", "x") })
	waitQueued(t, s, 3)
	release()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if errs[1] == nil {
		t.Error("the call that broke a deferred foreign key: success")
	}
	if hasSetting(t, s, "breaking") {
		t.Error("the breaking call's row is stored")
	}
	for i, key := range []string{"first", "", "last"} {
		if key == "" {
			continue
		}
		if errs[i] != nil {
			t.Errorf("%s: %v", key, errs[i])
		}
		if !hasSetting(t, s, key) {
			t.Errorf("%s: acknowledged, not stored", key)
		}
	}
	if r := s.BatchStats().Refused - before.Refused; r != 1 {
		t.Errorf("%d groups rerun call by call, want 1", r)
	}
	// The writer goes on: no transaction was left open.
	if err := setSetting(t.Context(), s, "next", "x"); err != nil {
		t.Fatal(err)
	}
}

// Close lets the group in flight commit, answers the calls still queued
// with an error without running them, and refuses calls after it.
func TestWriterClose(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	s := openWith(t, path, config{})
	release, held := holdWriter(t, s)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = setSetting(t.Context(), s, fmt.Sprintf("queued:%d", i), "x") })
	}
	waitQueued(t, s, len(errs))
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	wg.Wait() // answered while the holder still runs
	for i, err := range errs {
		if !errors.Is(err, errStoreClosed) {
			t.Errorf("queued call %d: %v, want %v", i, err, errStoreClosed)
		}
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the call in flight finished", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-held; err != nil {
		t.Fatalf("the call in flight at Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := setSetting(t.Context(), s, "late", "x"); !errors.Is(err, errStoreClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	r := openWith(t, path, config{})
	if !hasSetting(t, r, "holder") {
		t.Error("the call in flight at Close is not stored")
	}
	for i := range errs {
		if hasSetting(t, r, fmt.Sprintf("queued:%d", i)) {
			t.Errorf("queued:%d stored, though answered with an error", i)
		}
	}
}

// A panic in a call reaches its own caller (where net/http would recover
// it) and neither the writer nor the call's group-mates.
func TestWriterPanicReachesItsCaller(t *testing.T) {
	t.Parallel()
	s := openWith(t, filepath.Join(t.TempDir(), "a.db"), config{})
	release, held := holdWriter(t, s)
	var wg sync.WaitGroup
	var recovered any
	var okErr error
	wg.Go(func() {
		defer func() { recovered = recover() }()
		_ = s.withTx(t.Context(), func(ctx context.Context, q querier) error {
			if _, err := q.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('panicked', 'x')`); err != nil {
				return err
			}
			panic("boom")
		})
	})
	waitQueued(t, s, 1)
	wg.Go(func() { okErr = setSetting(t.Context(), s, "mate", "x") })
	waitQueued(t, s, 2)
	release()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if recovered != "boom" {
		t.Fatalf("recovered %v, want the call's panic", recovered)
	}
	if okErr != nil || !hasSetting(t, s, "mate") {
		t.Fatalf("group-mate of a panicking call: %v", okErr)
	}
	if hasSetting(t, s, "panicked") {
		t.Fatal("the panicking call's insert is stored")
	}
}

// A call that opens rows and panics before closing them leaves nothing
// open: the writer closes them, so the writer goes on and Close returns.
// (fn's context is never cancelled, so database/sql would not close them,
// and the rows would hold the write connection forever.)
func TestWriterClosesRowsLeftOpen(t *testing.T) {
	t.Parallel()
	// Not openWith: its cleanup would Close again, and hang with the bug.
	s, err := open(t.Context(), filepath.Join(t.TempDir(), "a.db"), config{maxBatch: defaultMaxBatch, synchronous: "FULL"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b", "c"} {
		if err := setSetting(t.Context(), s, key, "x"); err != nil {
			t.Fatal(err)
		}
	}
	func() {
		defer func() {
			if r := recover(); r != "rows left open" {
				t.Errorf("recovered %v, want the call's panic", r)
			}
		}()
		_ = s.withTx(t.Context(), func(ctx context.Context, q querier) error {
			rows, err := q.QueryContext(ctx, `SELECT key FROM settings`)
			if err != nil {
				return err
			}
			if !rows.Next() {
				return errors.New("no settings")
			}
			panic("rows left open")
		})
	}()
	// The writer goes on with the connection the rows were open on.
	if err := setSetting(t.Context(), s, "after", "x"); err != nil {
		t.Fatalf("write after the call that left rows open: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs on rows a call left open")
	}
}

// When BEGIN IMMEDIATE of a group fails (another process holds the write
// lock past the busy timeout), no call ran: every call of the group hears
// that error at once, and none runs again alone (each would wait the busy
// timeout again). Nothing is counted as committed, nor as rerun.
func TestWriterBeginFailsAnswersTheGroup(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	s := openWith(t, path, config{})
	const wait = 300 * time.Millisecond
	if err := s.withTx(t.Context(), func(ctx context.Context, q querier) error {
		_, err := q.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, wait.Milliseconds()))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Another store on the file holds the write lock.
	other := openWith(t, path, config{})
	release, held := holdWriter(t, other)
	defer release()
	before := s.BatchStats()
	// The first call's batch starts (and waits in BEGIN) before the group
	// queues, so the group is taken together after it.
	firstCtx := &batchStartCtx{Context: t.Context(), started: make(chan struct{})}
	first := make(chan error, 1)
	go func() { first <- setSetting(firstCtx, s, "first", "x") }()
	<-firstCtx.started
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() { errs[i] = setSetting(t.Context(), s, fmt.Sprintf("group:%d", i), "x") })
	}
	waitQueued(t, s, n) // queued together behind the first call's BEGIN
	wg.Wait()
	elapsed := time.Since(start)
	if err := <-first; sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY {
		t.Errorf("first call: %v, want SQLITE_BUSY", err)
	}
	for i, err := range errs {
		if sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY {
			t.Errorf("group call %d: %v, want SQLITE_BUSY", i, err)
		}
	}
	// The first call's BEGIN, then the group's: not one more per call.
	if elapsed >= (n+1)*wait {
		t.Errorf("the group took %v: its calls waited for the lock one by one", elapsed)
	}
	after := s.BatchStats()
	if b, c, r := after.Batches-before.Batches, after.Calls-before.Calls, after.Refused-before.Refused; b != 0 || c != 0 || r != 0 {
		t.Errorf("%d commits of %d calls, %d groups rerun; want none", b, c, r)
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	// The writer goes on once the lock is free.
	if err := setSetting(t.Context(), s, "after", "x"); err != nil {
		t.Fatal(err)
	}
	if after := s.BatchStats(); after.Batches-before.Batches != 1 || after.Calls-before.Calls != 1 {
		t.Errorf("after the lock is free: %d commits of %d calls, want 1 of 1", after.Batches-before.Batches, after.Calls-before.Calls)
	}
}

// batchStartCtx closes started at its second Err call: do checks the
// context before queuing the call, and the writer checks it again when the
// call's batch starts, just before BEGIN.
type batchStartCtx struct {
	context.Context
	errs    atomic.Int32
	started chan struct{}
}

func (c *batchStartCtx) Err() error {
	if c.errs.Add(1) == 2 {
		close(c.started)
	}
	return c.Context.Err()
}
