package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestBatcher exposes a batcher to the external tests.
type TestBatcher struct{ b *batcher }

func NewTestBatcher(pool *pgxpool.Pool, workers int) *TestBatcher {
	return &TestBatcher{newBatcher(pool, workers, 64)}
}

// QueryInt runs sql, which returns one bigint, in the next batch.
func (t *TestBatcher) QueryInt(ctx context.Context, order, sql string, args ...any) (int64, error) {
	v, err := t.b.call(ctx, &batchCall{order: order, sql: sql, args: args, scan: func(row pgx.Row) (any, error) {
		var n int64
		err := row.Scan(&n)
		return n, err
	}})
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// QueryText runs sql, which returns one text, in the next batch, as a
// "lazy", "read" or "durable" call.
func (t *TestBatcher) QueryText(ctx context.Context, order, sql, kind string) (string, error) {
	v, err := t.b.call(ctx, &batchCall{order: order, sql: sql, lazy: kind == "lazy", read: kind == "read", scan: func(row pgx.Row) (any, error) {
		var s string
		err := row.Scan(&s)
		return s, err
	}})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (t *TestBatcher) Exec(ctx context.Context, order, sql string, args ...any) error {
	_, err := t.b.call(ctx, &batchCall{order: order, sql: sql, args: args})
	return err
}

func (t *TestBatcher) Waiting() int64 { return t.b.waiting.Load() }
func (t *TestBatcher) Refused() int64 { return t.b.refused.Load() }
func (t *TestBatcher) Merged() int64  { return t.b.merged.Load() }

// MergedCalls counts the calls the merged statements carried.
func (t *TestBatcher) MergedCalls() int64 { return t.b.mergedCalls.Load() }
func (t *TestBatcher) Stop()              { t.b.stop() }

// RunBatch runs one exec call per statement as one batch, directly, as a
// worker would; ctxs[i] is call i's context.
func (t *TestBatcher) RunBatch(ctxs []context.Context, sqls []string) []error {
	calls := make([]*batchCall, len(sqls))
	for i := range sqls {
		calls[i] = &batchCall{ctx: ctxs[i], order: fmt.Sprint(i), sql: sqls[i], done: make(chan struct{})}
	}
	t.b.run(calls)
	errs := make([]error, len(calls))
	for i, c := range calls {
		<-c.done
		errs[i] = c.err
	}
	return errs
}

// Batcher exposes the store's own batcher.
func (s *Store) Batcher() *TestBatcher { return &TestBatcher{s.batch} }

// TransitionBatcher exposes the batcher of the store's transitions.
func (s *Store) TransitionBatcher() *TestBatcher { return &TestBatcher{s.transitions} }

// ReplayLookups reports how many hinted replay lookups found a holder and
// how many went on to the claiming statement, and how many keys the hint
// holds.
func (s *Store) ReplayLookups() (found, missed int64, hinted int) {
	return s.found.Load(), s.missed.Load(), s.hint.size()
}

// MigrateSchema is what Open runs before it starts: the migrations of the
// pool's current schema, under the advisory lock. Tests race it on pools
// that are already connected, so that the callers overlap.
func MigrateSchema(ctx context.Context, pool *pgxpool.Pool) error {
	schema, err := currentSchema(ctx, pool)
	if err != nil {
		return err
	}
	return migrateSchema(ctx, pool, schema)
}

// MergeReports merges the agents' reports of a batch whatever the
// statistics say (reportMerging), as on a table of some size.
func (s *Store) MergeReports() { s.reports.forceOn.Store(true) }

// MergesReports reports whether the store merges reports now, reading the
// statistics again first, and waiting for the read.
func (s *Store) MergesReports() bool {
	s.reports.checked.Store(0)
	s.reports.on(s.pool)
	for s.reports.reading.Load() {
		time.Sleep(time.Millisecond)
	}
	return s.reports.on(s.pool)
}

// ReportManySQL is the merged statement of the agents' reports.
const ReportManySQL = reportManySQL
