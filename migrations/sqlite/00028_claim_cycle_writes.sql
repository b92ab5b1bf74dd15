-- +goose Up
-- PostgreSQL's migration 00028 drops the foreign key of events.action_id,
-- for the cost of a claim cycle there (issue 45). SQLite keeps it: its key
-- check is a read under the single writer's lock, with no row lock to
-- write. Nothing
-- to do; the number is kept so both stores carry the same migration
-- versions.
SELECT 1;

-- +goose Down
SELECT 1;
