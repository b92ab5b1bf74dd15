-- +goose Up
-- A claim cycle's writes, continued (issue 45; docs/performance.md,
-- "Where a claim cycle's PostgreSQL time goes"). events_kind held every
-- event, so each submission and each completion added an entry to it, for
-- a list by kind (the audit log's filter, GET events by kind) that needs it
-- only for the kinds that are few: every action has one submitted event
-- and most have one completed, so a list of either reads events_pkey from
-- the newest and finds its page near the end. The index now holds the
-- other kinds; a list by kind names the kind as a literal
-- (postgres/event.go), so the planner can prove the predicate
-- (TestEventListByKindReadsItsIndex). A claim cycle writes two index
-- entries fewer (19 instead of 21: 13 on actions, 3 for each of its two
-- events), a new submission one.
CREATE INDEX events_kind_listed ON events (kind, id) WHERE kind NOT IN ('submitted', 'completed');
DROP INDEX events_kind;

-- +goose Down
CREATE INDEX events_kind ON events (kind, id);
DROP INDEX events_kind_listed;
