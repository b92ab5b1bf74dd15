-- +goose Up
-- The twin of postgres/00010_overview_indexes.sql: the overview's
-- statements read these (covering) indexes, never the whole table.
CREATE INDEX actions_pending_tool ON actions (tool, created_at) WHERE state = 'pending';
CREATE INDEX actions_decided ON actions (decided_at, tool, created_at, decided_by)
    WHERE decided_at IS NOT NULL;

-- +goose Down
DROP INDEX actions_decided;
DROP INDEX actions_pending_tool;
