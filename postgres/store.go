// Package postgres implements queue.Store and accounts.Store on PostgreSQL
// with pgx. It is the production store: several server processes may share
// one database, so every guard lives in the schema (partial unique indexes,
// conditional updates) and changes are announced with LISTEN/NOTIFY.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/approvals/approvals/migrations"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
)

//go:generate go run ./internal/sqlgen

var _ storage.Store = (*Store)(nil)

// Store is the PostgreSQL store.
type Store struct {
	pool    *pgxpool.Pool
	hub     *queue.Hub
	log     *slog.Logger
	channel string
	cancel  context.CancelFunc
	done    chan struct{}
	pending pendingMark
	// pendingSubs counts SubscribePending subscribers.
	pendingSubs atomic.Int64
	batch       *batcher
	// transitions batches ActionTransition apart from batch: a transition
	// may wait for the lock of an action row another transaction holds,
	// and must not hold up the token lookups and submissions meanwhile.
	transitions *batcher
	batchPool   *pgxpool.Pool
	// hint remembers keys seen held, for the cheap replay lookup; found
	// and missed count the lookups that found a holder and those that
	// sent the submission on to the claiming statement.
	hint          *heldHint
	found, missed atomic.Int64
	// reports says whether the agents' reports of a batch are merged
	// (reportMerging).
	reports reportMerging
}

// Options tune Open.
type Options struct {
	Logger *slog.Logger
	// MaxConns caps the pool unless the URL sets pool_max_conns.
	MaxConns int32
	// BatchWorkers is how many batches of hot statements (token lookups,
	// submissions, replay events) may be in flight at once; each holds one
	// connection of the batches' own pool while it runs. Default 2: on 2
	// cores, 2 workers beat 4 (larger batches cost PostgreSQL less per call)
	// and 1 (a single batch in flight leaves a core idle while it waits);
	// a batch starts beside another only for eight waiting calls
	// (defaultSpillAt).
	BatchWorkers int
}

// DefaultConnectTimeout bounds one attempt to connect to a host unless the
// URL sets connect_timeout (or PGCONNECT_TIMEOUT is set): a host that does
// not answer at all (a partition, a hung server) would otherwise hold every
// request that needs a new connection until its own deadline, or for ever,
// where it should be answered 503 unavailable at once.
const DefaultConnectTimeout = 5 * time.Second

// Open connects, applies migrations under an advisory lock (so several
// processes may start at once) and starts listening for changes.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 && !strings.Contains(url, "connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = 16
		if opts.MaxConns > 0 {
			cfg.MaxConns = opts.MaxConns
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	schema, err := currentSchema(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := migrateSchema(ctx, pool, schema); err != nil {
		pool.Close()
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	workers := opts.BatchWorkers
	if workers <= 0 {
		workers = 2
	}
	// The batches run on connections of their own that always use the
	// generic plan of their statements. Left to choose, PostgreSQL plans
	// the replay lookup afresh on every call (its custom plans look cheaper
	// for a few array elements), which cost more than running it: 29% of
	// the backends' time under the replay benchmark. The plans of these
	// statements do not depend on the values (every row is an index probe
	// by key), so the generic plan is the right one; other queries keep the
	// usual choice.
	bcfg := cfg.Copy()
	bcfg.MaxConns = int32(2 * workers) // the submissions' batcher and the transitions'
	bcfg.MinConns = 0
	if _, set := bcfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		bcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	bpool, err := pgxpool.NewWithConfig(ctx, bcfg)
	if err != nil {
		cancel()
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	s := &Store{pool: pool, batchPool: bpool, hub: queue.NewHub(), log: log, channel: "approvals_changes_" + schema, cancel: cancel, done: make(chan struct{}),
		batch: newBatcher(bpool, workers, 64), transitions: newBatcher(bpool, workers, 64),
		hint: newHeldHint(hintPerGeneration)}
	ready := make(chan struct{})
	go s.listen(lctx, ready)
	go s.watchPending(lctx, 250*time.Millisecond)
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		// The listener keeps retrying in the background; waiters also re-read
		// on a timer, so a slow LISTEN only delays wake-ups.
		log.Warn("LISTEN not established within 5s; continuing")
	}
	return s, nil
}

func currentSchema(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var schema string
	if err := pool.QueryRow(ctx, currentSchemaSQL).Scan(&schema); err != nil {
		return "", fmt.Errorf("read current schema: %w", err)
	}
	return schema, nil
}

// migrateSchema applies the embedded migrations under a PostgreSQL
// advisory lock. The lock is keyed by the schema, so processes starting on
// one schema queue behind each other while other schemas (tests) migrate in
// parallel.
func migrateSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return migrate(ctx, db, schema)
}

func migrate(ctx context.Context, db *sql.DB, schema string) error {
	h := fnv.New64a()
	_, _ = h.Write([]byte("approvals migrations " + schema))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)),
		lock.WithLockTimeout(1, 300)) // poll every second, for up to 5 minutes
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(),
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// BatchStats implements queue.BatchStatser: the submissions' batcher (token
// lookups, submissions, replay records) and the transitions', apart and
// summed.
func (s *Store) BatchStats() queue.BatchStats {
	st := queue.BatchStats{LookupsFound: s.found.Load(), LookupsMissed: s.missed.Load(), Lookups: true}
	for _, q := range []struct {
		name string
		b    *batcher
	}{{"submissions", s.batch}, {"transitions", s.transitions}} {
		qs := queue.BatchQueueStats{Name: q.name, Batches: q.b.batches.Load(), Calls: q.b.calls.Load(), Refused: q.b.refused.Load()}
		st.Queues = append(st.Queues, qs)
		st.Batches, st.Calls, st.Refused = st.Batches+qs.Batches, st.Calls+qs.Calls, st.Refused+qs.Refused
	}
	return st
}

// Pool exposes the pool for tests and benchmarks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// SupportsTokenGuard implements queue.Store: submissions and transitions
// check the agent token in their own statement.
func (s *Store) SupportsTokenGuard() bool { return true }

// Ping checks that PostgreSQL answers.
// Ping checks that the database answers and takes writes: a server in
// recovery (a standby not yet promoted) or a read-only session answers
// every write with an error, which is an outage to the caller, not a bug.
func (s *Store) Ping(ctx context.Context) error {
	var readOnly bool
	if err := s.pool.QueryRow(ctx, `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool`).Scan(&readOnly); err != nil {
		return err
	}
	if readOnly {
		return errReadOnly
	}
	return nil
}

// errReadOnly is Ping's answer from a database that takes no writes.
var errReadOnly = errors.New("the database is read-only (a standby, or a primary mid-failover)")

// Subscribe delivers changes made by any process.

// Close stops listening, releases waiters and closes the pool.
func (s *Store) Close() error {
	s.batch.stop()
	s.transitions.stop()
	s.cancel()
	<-s.done
	s.hub.Close()
	s.batchPool.Close()
	s.pool.Close()
	return nil
}

// listen holds one dedicated connection on LISTEN and republishes every
// notification to the hub, reconnecting with backoff.
func (s *Store) listen(ctx context.Context, ready chan struct{}) {
	defer close(s.done)
	var backoff listenBackoff
	for first := true; ctx.Err() == nil; first = false {
		listened, err := s.listenOnce(ctx, ready, !first)
		if ctx.Err() != nil {
			return
		}
		wait := backoff.next(listened)
		s.log.Warn("change listener lost its connection; reconnecting", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// listenBackoff is the listener's wait before reconnecting: 100ms, doubled
// after each failed try up to 5s, and back to 100ms once a connection
// listened. Without the reset, a second failover in the same process
// waited seconds for its wake-ups.
type listenBackoff struct{ wait time.Duration }

// next is the wait after a try; listened says whether it got as far as
// listening.
func (b *listenBackoff) next(listened bool) time.Duration {
	if listened || b.wait == 0 {
		b.wait = 100 * time.Millisecond
	}
	d := b.wait
	b.wait = min(b.wait*2, 5*time.Second)
	return d
}

// listenOnce listens until its connection fails, and says whether it
// listened at all. After a reconnect
// (again), the changes made while no connection listened were never
// heard: every long-poll is woken to read its action again.
func (s *Store) listenOnce(ctx context.Context, ready chan struct{}, again bool) (listened bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return false, err
	}
	if again {
		s.hub.WakeActions()
	}
	select {
	case <-ready:
	default:
		close(ready)
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			// The connection may be mid-wait; never return it to the pool.
			_ = conn.Conn().Close(context.Background())
			return true, err
		}
		id, state, ok := strings.Cut(n.Payload, ":")
		if ok {
			s.hub.Publish(queue.Change{ActionID: id, State: queue.State(state)})
		}
	}
}

// pendingMark is what watchPending last saw of the pending actions.
type pendingMark struct {
	mu    sync.Mutex
	count int64
	max   time.Time
	known bool
}

// readPending reads the mark: one index-only query.
func (s *Store) readPending(ctx context.Context) (int64, time.Time, error) {
	var (
		n  int64
		mx *time.Time
	)
	if err := s.pool.QueryRow(ctx, pendingMarkSQL).Scan(&n, &mx); err != nil {
		return 0, time.Time{}, err
	}
	if mx == nil {
		return n, time.Time{}, nil
	}
	return n, *mx, nil
}

// Subscribe delivers changes made by any process.
func (s *Store) Subscribe() queue.Subscription { return s.hub.Subscribe() }

// SubscribeAction delivers the changes of action id only (long-polls),
// calling wake (when not nil) after each; see queue.Hub.SubscribeAction.
func (s *Store) SubscribeAction(id string, wake func()) queue.Subscription {
	return s.hub.SubscribeAction(id, wake)
}

// SubscribePending also announces new pending actions. The first such
// subscriber after an idle spell takes the pending mark before it
// registers, so a pending action submitted after it subscribed is
// announced, and one from before is not announced as new.
func (s *Store) SubscribePending() queue.Subscription {
	if s.pendingSubs.Add(1) == 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, m, err := s.readPending(ctx)
		cancel()
		s.pending.mu.Lock()
		s.pending.count, s.pending.max, s.pending.known = n, m, err == nil
		s.pending.mu.Unlock()
	}
	sub := s.hub.Subscribe()
	var once sync.Once
	return queue.Subscription{Changes: sub.Changes, Cancel: func() {
		once.Do(func() {
			s.pendingSubs.Add(-1)
			sub.Cancel()
		})
	}}
}

// watchPending announces new pending approvals to this process's
// subscribers (the live dashboard). Inserts do not NOTIFY: a notifying
// transaction serialises commits, which would cap the submission rate. One
// cheap index-only query per process and interval finds them instead, and
// only while someone asked for them (SubscribePending): agent long-polls
// and the dispatcher wait on existing actions and never need it.
func (s *Store) watchPending(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.pendingSubs.Load() == 0 {
			continue
		}
		n, m, err := s.readPending(ctx)
		if err != nil {
			continue
		}
		s.pending.mu.Lock()
		// Without a mark (it could not be read) announce anyway: a
		// spurious refresh is cheap, a missed approval is not.
		changed := !s.pending.known || n != s.pending.count || !m.Equal(s.pending.max)
		s.pending.count, s.pending.max, s.pending.known = n, m, true
		s.pending.mu.Unlock()
		if changed {
			s.hub.Publish(queue.Change{State: queue.StatePending})
		}
	}
}

// withTx runs fn in a transaction. The rollback uses a context that survives
// the cancellation of the request, so a cancelled request never leaves a
// transaction open on a pooled connection.
func (s *Store) withTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// isUniqueViolationOf reports a unique violation of the named constraint
// or unique index.
func isUniqueViolationOf(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

// sqlArgs collects query arguments and names their placeholders, for the
// queries whose WHERE clause depends on which filters are set.
type sqlArgs []any

// add appends v and returns its placeholder ("$3").
func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}
