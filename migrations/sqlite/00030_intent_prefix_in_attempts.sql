-- +goose Up
-- PostgreSQL's migration 00030 serves the search by intent key prefix from
-- the unique index of attempts (issue 45), for the cost of a claim cycle
-- there. SQLite keeps its prefix index, as it kept its other indexes in
-- 00023 and 00029. Nothing to do; the number is kept so both stores carry
-- the same migration versions.
SELECT 1;

-- +goose Down
SELECT 1;
