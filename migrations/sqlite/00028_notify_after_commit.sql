-- +goose Up
-- PostgreSQL's migration 00028 drops the trigger that announced a state
-- change with NOTIFY. SQLite has one process and no trigger: nothing to do;
-- the number is kept so both stores carry the same migration versions.
SELECT 1;

-- +goose Down
SELECT 1;
