-- The store's own statements: its schema, the pending mark of the live
-- queue, and the lazy commit of replay records.

-- name: currentSchemaSQL
SELECT current_schema();

-- name: pendingMarkSQL
-- pendingMarkSQL reads what watchPending compares: one index-only query.
SELECT count(*), max(created_at) FROM actions WHERE state = 'pending';

-- name: lazyCommitSQL
-- lazyCommitSQL turns off the wait for the WAL flush at commit, for the
-- current transaction only (a batch is one implicit transaction). The batch
-- still commits before its results are handed out; a crash of PostgreSQL
-- (of the server, not of approvals) within three wal_writer_delays of it
-- can lose it, and any later ordinary commit flushes it too.
SELECT set_config('synchronous_commit', 'off', true);
