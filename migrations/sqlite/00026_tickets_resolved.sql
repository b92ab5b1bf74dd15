-- +goose Up
-- The overview's ticket figures: the SQLite twin of
-- postgres/00026_tickets_resolved.sql.
CREATE INDEX tickets_resolved ON tickets (resolved_at) WHERE state = 'resolved';

-- +goose Down
DROP INDEX tickets_resolved;
