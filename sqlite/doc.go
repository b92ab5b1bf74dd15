// Package sqlite implements queue.Store and accounts.Store on an embedded
// SQLite database (modernc.org/sqlite, pure Go). It is the store of a single
// server process: changes are announced through an in-process queue.Hub after
// each commit, and every guard lives in the schema (partial unique indexes,
// conditional updates), exactly as in postgres.
//
// # Group commit
//
// Every write goes through one goroutine, the writer (writer.go), that owns
// the write connection and commits the write calls of concurrent requests
// in groups.
//
// With synchronous=FULL every commit costs an fsync of the WAL, which is
// most of what a small write costs; SQLite has one writer anyway, so
// callers only ever waited for each other's fsyncs. The writer takes every
// queued call at once (at most maxBatch), runs them in one IMMEDIATE
// transaction, each inside a savepoint of its own, and commits once: one
// fsync for the whole group. It never waits for time to pass: a call that
// finds the writer idle runs at once in a batch of one, so light load pays
// no latency; under load the calls that queue while one batch commits make
// the next batch.
//
// A call's error rolls back to its savepoint and is that call's answer
// alone. Results are handed out only after COMMIT returned: a caller never
// hears of success (and so never announces a change, nor answers a 2xx) for
// a write that is not durable. When BEGIN IMMEDIATE itself fails (the lock
// stayed busy for the whole busy timeout, say), no call has run: every call
// of the batch is answered with that error, as running each alone would
// only wait the busy timeout again, once per call. When the batch fails
// after calls ran (a savepoint, COMMIT, or a transaction SQLite rolled back
// under the calls), every call runs again alone in its own transaction, so
// one bad call never fails another; calls must therefore be safe to run
// twice (they set what they return on every run).
//
// Each call's fn gets its caller's context without its cancellation
// (context.WithoutCancel): modernc interrupts SQLite (sqlite3_interrupt)
// when a statement's context ends, and an interrupted write can roll back
// the whole transaction, batch-mates included. A caller that gives up
// before its batch starts is dropped unrun and answered ctx.Err(); once its
// batch started, its caller waits for the true outcome, so an error always
// means "not written". That wait is usually a few milliseconds, but BEGIN
// IMMEDIATE may wait up to the busy timeout (10 s) for another process's
// write lock, and a batch rerun call by call takes one transaction per
// call.
package sqlite
