-- +goose Up
-- The overview's ticket figures (queue.OverviewStore.TicketResolutionStats):
-- the tickets resolved in a window, read by their resolution time instead
-- of the whole table.
CREATE INDEX tickets_resolved ON tickets (resolved_at) WHERE state = 'resolved';

-- +goose Down
DROP INDEX tickets_resolved;
