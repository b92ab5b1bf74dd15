package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/approvals/approvals/migrations"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
)

var _ storage.Store = (*Store)(nil)

// Store is the SQLite store.
//
// SQLite admits one writer at a time, and with synchronous=FULL each commit
// waits for an fsync of the WAL, which costs far more than the rows of a
// small write. So all writes go through one writer goroutine that owns the
// write connection and commits concurrent calls together: one IMMEDIATE
// transaction (it takes the write lock up front, so it never fails half-way
// upgrading from reading to writing), each call in a savepoint of its own,
// one COMMIT and one fsync for the group (group commit; see writer). Under
// load a write waits for one commit shared with the others queued beside it
// instead of one commit per write queued before it; alone, it runs at once.
// Reads outside transactions use a separate read-only pool, which WAL lets
// run beside the writer.
type Store struct {
	write *sql.DB // one connection, owned by w
	w     *writer
	read  *sql.DB
	hub   *queue.Hub
}

// busyTimeout bounds how long a connection waits for a lock held by another
// process (the CLI, say); within this process the writer serialises.
const busyTimeout = 10 * time.Second

// Open opens (creating if needed) the database file at path, applies the
// migrations and returns the store.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, config{maxBatch: defaultMaxBatch, synchronous: "FULL"})
}

// config holds what the benchmarks and tests vary.
type config struct {
	// maxBatch caps the calls committed together; 1 commits every write
	// on its own (the design before group commit, for comparison).
	maxBatch    int
	synchronous string
	// commitHook: see writer.commitHook.
	commitHook func(calls int) error
}

func open(ctx context.Context, path string, cfg config) (*Store, error) {
	if path == "" {
		return nil, errors.New("open SQLite database: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	// A file: URI lets the path contain '?' or '#'; SQLite ignores the
	// underscore parameters, which the driver consumes.
	uri := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	common := fmt.Sprintf("_busy_timeout=%d&_foreign_keys=on", busyTimeout.Milliseconds())

	// synchronous=FULL: a claim is committed before a webhook delivery
	// starts, and that commit must survive a power loss, not only a crash.
	// It costs about a third more per write than NORMAL (BenchmarkWriters).
	//
	// temp_store=memory keeps the sub-journal in memory: the writer runs
	// each call in a savepoint, and SQLite saves the original of every page
	// a savepoint changes first in that journal, which otherwise spills to
	// a temporary file past 64 KiB (a group of a few calls), one pwrite per
	// page inside the write transaction. The sub-journal only serves
	// ROLLBACK TO within the open transaction (WAL recovery never reads
	// it), so memory loses no durability. The write connection sorts
	// nothing large, so temporary b-trees in memory stay small.
	//
	// No _txlock: nothing calls BeginTx on the write pool; the writer
	// runs BEGIN IMMEDIATE itself.
	wdb, err := sql.Open("sqlite", uri+"?"+common+"&_journal_mode=WAL&_synchronous="+cfg.synchronous+
		"&_pragma=temp_store(memory)")
	if err != nil {
		return nil, fmt.Errorf("open SQLite database %s: %w", abs, err)
	}
	// One connection: the writer's. A second would only wait for SQLite's
	// write lock in the busy handler.
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	wdb.SetConnMaxLifetime(0)
	if err := pingBusy(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open SQLite database %s: %w", abs, err)
	}
	if err := migrate(ctx, uri+fmt.Sprintf("?_busy_timeout=%d&_journal_mode=WAL&_txlock=immediate", busyTimeout.Milliseconds())); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("SQLite database %s: %w", abs, err)
	}
	rdb, err := sql.Open("sqlite", uri+"?"+common+"&_query_only=on")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open SQLite database %s: %w", abs, err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	if err := pingBusy(ctx, rdb); err != nil {
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("open SQLite database %s: %w", abs, err)
	}
	return &Store{write: wdb, w: newWriter(wdb, cfg.maxBatch, cfg.commitHook), read: rdb, hub: queue.NewHub()}, nil
}

// pingBusy opens a first connection, retrying while SQLite answers
// SQLITE_BUSY: a connection switches the file to WAL as it opens, which
// needs an exclusive lock that SQLite does not wait for through the busy
// timeout, so processes (or stores) opening one file at the same moment
// could fail to start.
func pingBusy(ctx context.Context, db *sql.DB) error {
	for try := 0; ; try++ {
		err := db.PingContext(ctx)
		if err == nil || sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY || try == 100 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// migrate applies the embedded migrations. SQLite has no session lock for
// goose, so two processes starting on a fresh file can both decide to apply
// a migration; the loser fails inside its (immediate) transaction and,
// retried, finds the migration applied.
//
// Migrations run on a connection of their own with foreign keys off (the
// SQLite default, so uri omits _foreign_keys): a migration that rebuilds a
// parent table, as SQLite must to change a CHECK constraint, would
// otherwise trip the references of its children. foreign_key_check then
// proves no reference was broken.
func migrate(ctx context.Context, uri string) error {
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	for try := 0; ; try++ {
		_, err = p.Up(ctx)
		if err == nil || try == 2 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	rows, err := db.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return fmt.Errorf("check foreign keys after migrations: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		return errors.New("migrations left a broken foreign key reference")
	}
	return rows.Err()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.read.PingContext(ctx); err != nil {
		return err
	}
	var one int
	return s.read.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
}

// Subscribe delivers the changes committed through this store.
func (s *Store) Subscribe() queue.Subscription { return s.hub.Subscribe() }

// SubscribeAction delivers the changes of action id only (long-polls),
// calling wake (when not nil) after each; see queue.Hub.SubscribeAction.
func (s *Store) SubscribeAction(id string, wake func()) queue.Subscription {
	return s.hub.SubscribeAction(id, wake)
}

// SubscribePending is Subscribe: inserts are published like every other
// commit of this process.
func (s *Store) SubscribePending() queue.Subscription { return s.hub.Subscribe() }

// SupportsTokenGuard implements queue.Store: no, the caller looks the agent
// token up before it submits or drives.
func (s *Store) SupportsTokenGuard() bool { return false }

// Close stops the writer (the batch in flight commits; writes still queued
// are answered with an error), releases waiters and closes both pools.
func (s *Store) Close() error {
	s.w.stop()
	s.hub.Close()
	return errors.Join(s.read.Close(), s.write.Close())
}

// BatchStats implements queue.BatchStatser: Batches counts the write
// transactions the writer committed (reruns included), Calls the writes
// they carried (Calls / Batches is the mean calls per commit), Refused the
// groups that failed as a whole after their calls ran and ran again call by
// call.
func (s *Store) BatchStats() queue.BatchStats {
	q := queue.BatchQueueStats{Name: "writes", Batches: s.w.batches.Load(), Calls: s.w.calls.Load(), Refused: s.w.refused.Load()}
	return queue.BatchStats{Batches: q.Batches, Calls: q.Calls, Refused: q.Refused, Queues: []queue.BatchQueueStats{q}}
}

// readTx runs fn in one read transaction, so an action and its tickets
// come from the same snapshot (WAL readers see one commit point).
func (s *Store) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// querier is what *sql.DB, *sql.Conn and *sql.Tx offer.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// withTx runs fn in an immediate write transaction through the writer,
// possibly beside other calls (each in its own savepoint), and returns once
// that transaction committed, or fn's error once fn's writes were rolled
// back. fn gets ctx without its cancellation (see writer) and must use the
// ctx and q it is given, and set what it returns on every run: a group
// that fails as a whole runs each call again on its own.
func (s *Store) withTx(ctx context.Context, fn writeFunc) error {
	return s.w.do(ctx, fn)
}

// exec runs one statement in its own write call and returns the rows it
// changed.
func (s *Store) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func isUniqueViolation(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func isForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// timeLayout is fixed-width UTC with nanoseconds, so that text order is time
// order and comparisons in SQL compare instants.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// nullTime formats an optional time; nil stays NULL.
func nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return fmtTime(*t)
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

func parseNullTime(ns sql.NullString) (*time.Time, error) {
	if !ns.Valid {
		return nil, nil
	}
	t, err := parseTime(ns.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

func nullString(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func ptrString(ns sql.NullString) *string {
	if !ns.Valid {
		return nil
	}
	s := ns.String
	return &s
}

// nullJSON stores an absent or empty raw message as NULL.
func nullJSON(m []byte) any {
	if len(m) == 0 {
		return nil
	}
	return string(m)
}

func rawJSON(ns sql.NullString) []byte {
	if !ns.Valid {
		return nil
	}
	return []byte(ns.String)
}

// placeholders returns "?, ?, ?" for n arguments.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
