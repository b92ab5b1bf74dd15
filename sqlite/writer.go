package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// writer is the one goroutine that owns the write connection and commits
// the write calls of concurrent requests in groups, one fsync per group
// (doc.go says how, and what a caller may rely on).
type writer struct {
	db       *sql.DB // the write pool: one connection, used only here
	maxBatch int
	// commitHook, when set (tests), runs before each COMMIT with the number
	// of calls in the transaction; an error makes the COMMIT fail: the
	// writer rolls back instead.
	commitHook func(calls int) error

	// conn is the write connection, held by the writer goroutine for its
	// life (nil until a batch gets it); it is used only there.
	conn *cachedConn

	mu     sync.Mutex
	queue  []*writeCall
	closed bool
	wake   chan struct{} // capacity 1: a call is queued
	quit   chan struct{} // closed by stop
	exited chan struct{} // closed when the loop returns

	// batches and calls count the transactions the writer committed
	// (groups and calls run alone, reruns included) and the calls they
	// carried, so calls/batches is the mean calls per commit; refused
	// counts groups that failed after their calls ran, whose calls then
	// ran again one by one.
	batches, calls, refused atomic.Int64
}

// writeFunc is the body of one write transaction. q runs statements on the
// write connection inside the call's savepoint; ctx is the caller's, without
// its cancellation. It must set everything it returns on every run.
type writeFunc func(ctx context.Context, q querier) error

// writeCall is one queued call. The writer stores the outcome in err (and a
// recovered panic in panicked) and then closes done; the caller reads them
// only after that.
type writeCall struct {
	ctx      context.Context
	fn       writeFunc
	taken    bool // under writer.mu: a batch (or stop) has it
	err      error
	panicked any
	done     chan struct{}
}

// errStoreClosed answers writes made while, or after, the store closes.
var errStoreClosed = errors.New("SQLite store is closed")

// defaultMaxBatch caps a batch: a larger one holds its first caller longer
// for little gain, as the fsync is shared already at a few calls.
const defaultMaxBatch = 64

func newWriter(db *sql.DB, maxBatch int, commitHook func(int) error) *writer {
	if maxBatch < 1 {
		maxBatch = 1
	}
	w := &writer{db: db, maxBatch: maxBatch, commitHook: commitHook,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
	go w.loop()
	return w
}

// do queues fn and returns its outcome. A call is either dropped unrun
// (ctx ended before its batch started, or the store closed) or run, and
// then answered with its outcome after the commit.
func (w *writer) do(ctx context.Context, fn writeFunc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &writeCall{ctx: ctx, fn: fn, done: make(chan struct{})}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errStoreClosed
	}
	w.queue = append(w.queue, c)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default: // the writer is awake already
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		w.mu.Lock()
		if !c.taken {
			if i := slices.Index(w.queue, c); i >= 0 {
				w.queue = slices.Delete(w.queue, i, i+1)
			}
			w.mu.Unlock()
			return ctx.Err()
		}
		w.mu.Unlock()
		// Its batch runs: wait for what it did.
		<-c.done
	}
	if c.panicked != nil {
		panic(c.panicked)
	}
	return c.err
}

// stop refuses new calls, lets the batch in flight finish, answers the
// calls it did not take with errStoreClosed and returns once the writer
// goroutine has returned.
func (w *writer) stop() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.exited
		return
	}
	w.closed = true
	left := w.queue
	w.queue = nil
	for _, c := range left {
		c.taken = true
	}
	w.mu.Unlock()
	close(w.quit)
	for _, c := range left {
		c.err = errStoreClosed
		close(c.done)
	}
	<-w.exited
}

func (w *writer) loop() {
	defer close(w.exited)
	defer func() {
		if w.conn != nil {
			w.conn.close()
		}
	}()
	batch := make([]*writeCall, 0, w.maxBatch)
	for {
		batch = w.take(batch)
		if batch == nil {
			return
		}
		w.run(batch)
		clear(batch)
	}
}

// take waits for queued calls and returns up to maxBatch of them, or nil
// once the writer is stopped.
func (w *writer) take(into []*writeCall) []*writeCall {
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return nil
		}
		if n := min(len(w.queue), w.maxBatch); n > 0 {
			into = append(into[:0], w.queue[:n]...)
			for _, c := range into {
				c.taken = true
			}
			// Keep the rest in a fresh slice: the taken head must not be
			// reached through the queue's array.
			w.queue = append([]*writeCall(nil), w.queue[n:]...)
			w.mu.Unlock()
			return into
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.quit:
		}
	}
}

// run runs one batch and answers every call in it.
func (w *writer) run(batch []*writeCall) {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			w.answer(c, err)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	if w.conn == nil {
		conn, err := w.db.Conn(context.Background())
		if err != nil {
			for _, c := range live {
				w.answer(c, err)
			}
			return
		}
		w.conn = &cachedConn{conn: conn, stmts: map[string]*sql.Stmt{}}
	}
	conn := w.conn
	if len(live) == 1 {
		// Alone: its BEGIN or COMMIT failing is its own outcome.
		w.answer(live[0], w.runAlone(conn, live[0]))
		return
	}
	errs, beginErr, ok := w.runTogether(conn, live)
	if ok {
		for i, c := range live {
			w.answer(c, errs[i])
		}
		return
	}
	if beginErr != nil {
		// Nothing ran: each call alone would only wait for the lock again.
		for _, c := range live {
			w.answer(c, beginErr)
		}
		return
	}
	w.refused.Add(1)
	for _, c := range live {
		if err := c.ctx.Err(); err != nil {
			// Its batch rolled back: nothing of it was written.
			w.answer(c, err)
			continue
		}
		c.panicked = nil
		w.answer(c, w.runAlone(conn, c))
	}
}

func (w *writer) answer(c *writeCall, err error) {
	c.err = err
	close(c.done)
}

// invoke runs c's fn, turning a panic into an error here and a panic again
// in the caller's goroutine (where net/http, say, recovers it). It then
// closes any rows the call left open (also after a panic): fn's context is
// never cancelled, so database/sql would not close them, and open rows
// hold the connection, so a later ROLLBACK, the next call and Close would
// wait for them forever.
func (w *writer) invoke(c *writeCall, conn *cachedConn) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.panicked = r
			err = fmt.Errorf("write call panicked: %v", r)
		}
	}()
	defer conn.closeRows()
	return c.fn(context.WithoutCancel(c.ctx), conn)
}

// runAlone runs c in a transaction of its own.
func (w *writer) runAlone(conn *cachedConn, c *writeCall) error {
	bg := context.Background()
	if _, err := conn.ExecContext(bg, `BEGIN IMMEDIATE`); err != nil {
		return err
	}
	if err := w.invoke(c, conn); err != nil {
		rollback(conn)
		return err
	}
	if err := w.commit(conn, 1); err != nil {
		rollback(conn)
		return err
	}
	w.batches.Add(1)
	w.calls.Add(1)
	return nil
}

// runTogether runs the batch in one transaction, each call in a savepoint,
// and returns each call's error once the transaction committed. It reports
// false, having answered nobody and left no transaction open, when the
// batch failed as a whole; beginErr is then BEGIN's error if the
// transaction never started (no call ran), else nil.
func (w *writer) runTogether(conn *cachedConn, batch []*writeCall) (errs []error, beginErr error, ok bool) {
	bg := context.Background()
	if _, err := conn.ExecContext(bg, `BEGIN IMMEDIATE`); err != nil {
		return nil, err, false
	}
	errs = make([]error, len(batch))
	for i, c := range batch {
		if _, err := conn.ExecContext(bg, `SAVEPOINT call`); err != nil {
			rollback(conn)
			return nil, nil, false
		}
		if errs[i] = w.invoke(c, conn); errs[i] != nil {
			// Undo the call's writes; if SQLite rolled back the whole
			// transaction under it (an interrupt, I/O error or full disk),
			// the savepoint is gone and this fails: the batch failed.
			if _, err := conn.ExecContext(bg, `ROLLBACK TO call`); err != nil {
				rollback(conn)
				return nil, nil, false
			}
		}
		if _, err := conn.ExecContext(bg, `RELEASE call`); err != nil {
			rollback(conn)
			return nil, nil, false
		}
	}
	if err := w.commit(conn, len(batch)); err != nil {
		rollback(conn)
		return nil, nil, false
	}
	w.batches.Add(1)
	w.calls.Add(int64(len(batch)))
	return errs, nil, true
}

func (w *writer) commit(conn *cachedConn, calls int) error {
	if w.commitHook != nil {
		if err := w.commitHook(calls); err != nil {
			return err
		}
	}
	_, err := conn.ExecContext(context.Background(), `COMMIT`)
	return err
}

// rollback ends whatever transaction is open on conn. A failed COMMIT (a
// deferred constraint, SQLITE_BUSY) can leave it open; a transaction SQLite
// rolled back itself leaves none, and ROLLBACK's complaint is ignored.
func rollback(conn querier) {
	_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
}

// maxCachedStmts bounds the writer's statement cache. The write statements
// are a few dozen fixed texts (a few more with their IN lists' lengths).
const maxCachedStmts = 256

// cachedConn is the querier the writer hands to calls: ExecContext and
// QueryRowContext run statements prepared once on the write connection and
// kept, so a submission's statements are not parsed and planned again on
// every call (modernc keeps the prepared SQLite statement in a driver
// statement). QueryContext does not use the cache: its rows stay open
// while the call may run other statements, and one prepared statement
// cannot run twice at once. It records the rows it hands out, and the
// writer closes them after each call (closeRows).
type cachedConn struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	rows  []*sql.Rows // handed out by QueryContext during the current call
}

func (c *cachedConn) stmt(ctx context.Context, query string) *sql.Stmt {
	if st, ok := c.stmts[query]; ok {
		return st
	}
	if len(c.stmts) >= maxCachedStmts {
		return nil
	}
	st, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil // run uncached: it reports the error
	}
	c.stmts[query] = st
	return st
}

func (c *cachedConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.conn.ExecContext(ctx, query, args...)
}

func (c *cachedConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.conn.QueryRowContext(ctx, query, args...)
}

func (c *cachedConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := c.conn.QueryContext(ctx, query, args...)
	if err == nil {
		c.rows = append(c.rows, rows)
	}
	return rows, err
}

// closeRows closes the rows handed out since the last closeRows; closing
// rows the call closed already does nothing.
func (c *cachedConn) closeRows() {
	for _, r := range c.rows {
		r.Close()
	}
	clear(c.rows)
	c.rows = c.rows[:0]
}

func (c *cachedConn) close() {
	for _, st := range c.stmts {
		st.Close()
	}
	c.conn.Close()
}
