-- +goose Up
-- A claim cycle's writes (issue 45; docs/performance.md, round 4).
--
-- events.action_id loses its foreign key. Every event row ran the key's
-- check: a query through SPI that locks the action row FOR KEY SHARE,
-- which writes the lock into the row and a WAL record, two a claim cycle
-- (the claim's event and the completion's): 29.3 WAL records a cycle with
-- the key, 27.4 without. In scripts/bench, two pairs of runs on the machine
-- at rest: PostgreSQL CPU per claim cycle 717 and 630 us with the key, 523
-- and 476 us without (medians of three rounds); cycles/s 1,277 and 1,443
-- against 1,623 and 1,810. What it guarded still holds without it: actions
-- are never deleted, every statement that writes an action's event either
-- inserts, updates or locks that action in the same statement or
-- transaction (submit, transition, decide, the sweeps, tickets), and the
-- two inserts of an event by id alone (eventInsertSQL: a replay's record,
-- a delivery's attempt; ticketCheckRecordSQL: a verifier's check) now
-- append only WHERE EXISTS the action and answer not found otherwise
-- (TestMergedEventsOfUnknownActions; storetest Event/UnknownAction*). The
-- other tables' keys to actions stay: none is on the claim cycle.
ALTER TABLE events DROP CONSTRAINT events_action_id_fkey;

-- +goose Down
ALTER TABLE events ADD CONSTRAINT events_action_id_fkey FOREIGN KEY (action_id) REFERENCES actions (id);
