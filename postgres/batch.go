package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// batcher merges the hot single-statement calls of concurrent requests
// (token lookups, submissions, replay events) into pipelined batches: one
// network round trip, one backend wake-up and one commit for up to
// maxBatch statements instead of one each. Measured on 2 cores, those
// per-statement costs, not the rows written, were most of what a submission
// cost PostgreSQL and the server (docs/performance.md).
//
// It never waits for time to pass: with no batch in flight a worker takes
// every waiting call at once, so under light load a batch holds one
// statement and adds no latency. While a batch is in flight, the calls that
// arrive wait for it to finish, unless spillAt of them are waiting: then
// another worker sends them as a batch of their own. Batches stay large
// enough to spread a statement's fixed cost, and under load several run at
// once.
//
// A batch runs in one implicit transaction (pgx sends one Sync), so results
// are handed out only after it committed, and an error in any statement
// rolls back all of them. Every statement then runs again on its own, so
// one bad call never fails another. Statements are sorted by their lock key
// (the intent key of a submission) so that batches in any number of
// processes take their locks in one order and cannot deadlock each other.
//
// A store runs two: one for token lookups, submissions and replay records,
// one for transitions (whose calls may wait for a row lock). A batch of
// replay records and reads commits without waiting for its WAL flush
// (batchCall.lazy).
type batcher struct {
	pool     *pgxpool.Pool
	maxBatch int
	// spillAt is how many calls must be waiting before a worker starts a
	// batch while another batch is in flight (see take).
	spillAt int
	wg      sync.WaitGroup

	mu       sync.Mutex
	ready    *sync.Cond // signalled when take's answer may have changed
	queue    []*batchCall
	inflight int
	closed   bool

	// waiting counts calls not yet taken by a worker; refused counts
	// batches the server refused, whose calls then ran one by one.
	// merged counts statements that did the work of several calls;
	// batches and calls count what was sent.
	waiting, refused, merged, batches, calls atomic.Int64
	// mergedCalls counts the calls those merged statements carried.
	mergedCalls atomic.Int64
}

// batchCall is one queued statement. The worker stores the outcome in val
// and err and then closes done; the caller reads them only after that, so a
// caller that gave up (its context ended) leaves nothing racing.
type batchCall struct {
	order string // lock order within a batch; "" sorts first
	// kind, when set, merges this call with the others of its kind in a
	// batch into one statement; arg is the call's input to it.
	kind batchKind
	arg  any
	// ctx is the caller's: a call whose caller has given up by the time its
	// batch is sent is dropped, not run (its effect would have no owner).
	ctx context.Context
	// sql and args are the call as a statement of its own; a merged call
	// may leave them empty and give statement, which makes them only when
	// the call goes alone (a submission has 36 arguments, a transition's
	// statement is built for its parameters).
	sql       string
	args      []any
	statement func() (string, []any)
	// scan reads the statement's single row; nil executes it for its
	// effect. It must set everything it returns on every call: a rolled-back
	// batch runs it again.
	scan func(pgx.Row) (any, error)
	// lazy marks a call whose commit need not wait for the WAL flush: the
	// audit record of a replay, which changes no state. read marks a call
	// that writes nothing (a token lookup): its commit has nothing to flush.
	// A batch with a lazy call and no call that is neither commits with
	// synchronous_commit off; one durable write makes the whole batch wait
	// for its flush.
	lazy, read bool
	val        any
	err        error
	done       chan struct{}
}

// batchKind merges calls that run the same statement with different
// arguments: one multi-row statement costs PostgreSQL a fraction of the
// single-row ones (executor start-up, index and CHECK constraint set-up,
// locks: measured 2.5x less per row at 10 rows). merge returns one statement
// for calls (two or more, in lock order) whose rows are the single
// statement's columns preceded by the index of the call in calls, at most one
// row per call; a call left without a row is scanned as having none. A
// statement with no rows (an insert) answers every call with nil.
type batchKind interface {
	merge(calls []*batchCall) (sql string, args []any)
}

// errStoreClosed answers calls made while the store shuts down.
var errStoreClosed = errors.New("PostgreSQL store is closed")

// batchTimeout bounds one batch; it is detached from the callers' contexts
// because one caller giving up must not cancel the others' statements.
const batchTimeout = 30 * time.Second

// defaultSpillAt: a statement's fixed cost in PostgreSQL (executor set-up,
// commit) is about that of eight rows of a merged replay lookup, and two
// batches in flight at once also contend for the same index pages. Measured
// on 2 cores at 16 clients: workers that each took whatever was waiting
// sent 44% of their batches with one call, and PostgreSQL spent 143 us per
// replay; with a second batch only for four or more calls, 148 us; for
// eight or more, 104 us (batches of 6.6 calls on average), and 5.3k
// replays/s instead of 4.2k. New submissions gained too (3.1-3.3k/s from
// 2.8-2.9k). Under heavier load several batches still run at once.
const defaultSpillAt = 8

func newBatcher(pool *pgxpool.Pool, workers, maxBatch int) *batcher {
	b := &batcher{pool: pool, maxBatch: maxBatch, spillAt: defaultSpillAt}
	b.ready = sync.NewCond(&b.mu)
	b.wg.Add(workers)
	for range workers {
		go b.work()
	}
	return b
}

// stop lets the batches in flight finish, refuses new calls and answers
// the calls no worker took with errStoreClosed.
func (b *batcher) stop() {
	b.mu.Lock()
	b.closed = true
	left := b.queue
	b.queue = nil
	b.mu.Unlock()
	b.ready.Broadcast()
	for _, c := range left {
		b.waiting.Add(-1)
		c.err = errStoreClosed
		close(c.done)
	}
	b.wg.Wait()
}

// call queues c and returns its outcome. A call is either taken by a
// worker, which then always finishes it, or answered by stop.
func (b *batcher) call(ctx context.Context, c *batchCall) (any, error) {
	c.ctx, c.done = ctx, make(chan struct{})
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errStoreClosed
	}
	b.queue = append(b.queue, c)
	b.waiting.Add(1)
	b.mu.Unlock()
	b.ready.Signal()
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
	}
	// The caller gave up. A call no worker took yet leaves the queue unrun;
	// one a worker took is waited for (its batch is bounded by
	// batchTimeout), so that an error always means "not written": a caller
	// told its deadline passed must not find its claim committed later.
	b.mu.Lock()
	if i := slices.Index(b.queue, c); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		b.waiting.Add(-1)
		b.mu.Unlock()
		return nil, ctx.Err()
	}
	b.mu.Unlock()
	<-c.done
	return c.val, c.err
}

// take waits for the next batch: every waiting call (up to maxBatch) when
// no batch is in flight, or when at least spillAt calls wait. It returns
// nil when the batcher is stopped.
func (b *batcher) take(into []*batchCall) []*batchCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if b.closed {
			return nil
		}
		if n := len(b.queue); n > 0 && (b.inflight == 0 || n >= b.spillAt) {
			n = min(n, b.maxBatch)
			into = append(into[:0], b.queue[:n]...)
			clear(b.queue[:n])
			b.queue = b.queue[n:]
			b.waiting.Add(int64(-n))
			b.inflight++
			if len(b.queue) > 0 {
				// Another worker may take the rest.
				b.ready.Signal()
			}
			return into
		}
		b.ready.Wait()
	}
}

func (b *batcher) work() {
	defer b.wg.Done()
	batch := make([]*batchCall, 0, b.maxBatch)
	for {
		batch = b.take(batch)
		if batch == nil {
			return
		}
		b.run(batch)
		clear(batch)
		b.mu.Lock()
		b.inflight--
		b.mu.Unlock()
		// With none in flight, any waiting call may go: wake a worker.
		b.ready.Signal()
	}
}

func (b *batcher) run(batch []*batchCall) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	live := make([]*batchCall, 0, len(batch))
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	batch = live
	if len(batch) > 0 {
		b.batches.Add(1)
		b.calls.Add(int64(len(batch)))
	}
	if len(batch) > 1 {
		slices.SortStableFunc(batch, func(x, y *batchCall) int { return strings.Compare(x.order, y.order) })
		if !b.send(ctx, batch) {
			for _, c := range batch {
				close(c.done)
			}
			return
		}
		// The server refused a statement, so the whole transaction rolled
		// back: each call runs again on its own.
		b.refused.Add(1)
		for _, c := range batch {
			c.val, c.err = nil, nil
		}
	}
	for _, c := range batch {
		b.send(ctx, []*batchCall{c})
		close(c.done)
	}
}

// send runs calls as one pipeline, one implicit transaction, and stores
// each call's outcome in it (closing nothing). It reports whether the
// server refused a statement; the transaction then rolled back, and the
// outcomes stored say why for the call that was refused. A lost connection
// is stored in every call as it is: whether the batch committed is
// unknown, exactly as for a single statement.
//
// When the calls are lazy writes and reads only, the transaction commits
// without waiting for its WAL flush (lazyCommitSQL).
func (b *batcher) send(ctx context.Context, calls []*batchCall) (refused bool) {
	units := groupCalls(calls)
	pb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(units)+1)}
	lazy := slices.ContainsFunc(calls, func(c *batchCall) bool { return c.lazy }) &&
		!slices.ContainsFunc(calls, func(c *batchCall) bool { return !c.lazy && !c.read })
	if lazy {
		pb.Queue(lazyCommitSQL)
	}
	for _, u := range units {
		if len(u) > 1 {
			sql, args := u[0].kind.merge(u)
			pb.Queue(sql, args...)
			b.merged.Add(1)
			b.mergedCalls.Add(int64(len(u)))
			continue
		}
		sql, args := u[0].alone()
		pb.Queue(sql, args...)
	}
	br := b.pool.SendBatch(ctx, pb)
	isRefusal := func(err error) bool {
		if err == nil {
			return false // before errors.As, whose target would be allocated for every statement
		}
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr)
	}
	if lazy {
		if _, err := br.Exec(); err != nil {
			for _, c := range calls {
				c.val, c.err = nil, err
			}
			refused = isRefusal(err)
		}
	}
	for _, u := range units {
		var err error
		switch c := u[0]; {
		case len(u) > 1:
			err = readMerged(br, u)
		case c.scan != nil:
			c.val, c.err = c.scan(br.QueryRow())
			err = c.err
		default:
			_, c.err = br.Exec()
			err = c.err
		}
		if isRefusal(err) {
			refused = true
		}
	}
	if err := br.Close(); err != nil {
		if isRefusal(err) {
			refused = true
		}
		for _, c := range calls {
			if c.err == nil {
				c.val, c.err = nil, err
			}
		}
	}
	return refused
}

// alone is the call as a statement of its own.
func (c *batchCall) alone() (string, []any) {
	if c.sql == "" && c.statement != nil {
		return c.statement()
	}
	return c.sql, c.args
}

// groupCalls splits a sorted batch into units: the calls of one kind
// together (in the position of the first of them), every other call alone.
func groupCalls(batch []*batchCall) [][]*batchCall {
	var units [][]*batchCall
	byKind := map[batchKind]int{}
	for _, c := range batch {
		if c.kind == nil {
			units = append(units, []*batchCall{c})
			continue
		}
		i, ok := byKind[c.kind]
		if !ok {
			i = len(units)
			byKind[c.kind] = i
			units = append(units, nil)
		}
		units[i] = append(units[i], c)
	}
	return units
}

// readMerged hands out the rows of a merged statement and returns the
// statement's error, which is every call's error too.
func readMerged(br pgx.BatchResults, calls []*batchCall) error {
	answered := make([]bool, len(calls))
	scan := calls[0].scan
	rows, err := br.Query()
	if err == nil && scan != nil {
		for rows.Next() {
			i := -1
			v, err := scan(indexedRow{rows, &i})
			if err != nil && i < 0 {
				rows.Close()
				return err
			}
			if i < 0 || i >= len(calls) || answered[i] {
				// Not a row of this batch: the statement broke its promise.
				rows.Close()
				return errors.New("merged statement returned a row for no call")
			}
			calls[i].val, calls[i].err, answered[i] = v, err, true
		}
	}
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	for i, c := range calls {
		switch {
		case err != nil:
			c.val, c.err = nil, err
		case !answered[i] && scan != nil:
			c.val, c.err = scan(noRow{})
		}
	}
	return err
}

// indexedRow scans a merged statement's row: the call's index, then what
// the call's own scan asks for. (scanAction puts the index into its own
// destinations instead.)
type indexedRow struct {
	rows  pgx.Rows
	index *int
}

func (r indexedRow) Scan(dest ...any) error {
	return r.rows.Scan(append([]any{r.index}, dest...)...)
}

// noRow is the row of a call its merged statement had nothing for.
type noRow struct{}

func (noRow) Scan(...any) error { return pgx.ErrNoRows }
