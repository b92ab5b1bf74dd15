-- +goose Up
-- The overview (GET /overview) counts pending actions per tool and human
-- decisions by time; these indexes let each of its statements read an
-- index instead of the whole table, so it stays fast at millions of rows.
-- Pending per tool with the oldest: an index-only scan of pending rows.
CREATE INDEX actions_pending_tool ON actions (tool, created_at) WHERE state = 'pending';
-- Decisions in a window, with what time to decision and the per-tool
-- grouping need, so the scan never visits the table.
CREATE INDEX actions_decided ON actions (decided_at) INCLUDE (tool, created_at, decided_by)
    WHERE decided_at IS NOT NULL;

-- +goose Down
DROP INDEX actions_decided;
DROP INDEX actions_pending_tool;
