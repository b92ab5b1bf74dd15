-- +goose Up
-- PostgreSQL's migration 00029 narrows the index of events by kind to the
-- kinds that are few (issue 45). SQLite keeps its index: a list by kind
-- there names the kind as a parameter, which a partial index could not
-- serve. Nothing to do; the number is kept so both stores carry the same
-- migration versions.
SELECT 1;

-- +goose Down
SELECT 1;
