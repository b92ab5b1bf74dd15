-- +goose Up
-- A claim cycle's writes (issue 45), measured side by side with a perf
-- profile of the cluster (docs/performance.md, round 4):
--
-- events.action_id loses its foreign key. Every event row ran the key's
-- check: a query through SPI that locks the action row FOR KEY SHARE,
-- which writes the lock into the row and a WAL record, two a claim cycle
-- (the claim's event and the completion's). It was the largest cost of a
-- cycle that was not the rows themselves: about 90 of 630 us of
-- PostgreSQL CPU. What it guarded still holds without it: actions are
-- never deleted, every statement that writes an action's event either
-- inserts, updates or locks that action in the same statement or
-- transaction (submit, transition, decide, the sweeps, tickets), and the
-- one insert of an event by id alone (eventInsertSQL: a replay's record,
-- a delivery's attempt) now inserts only WHERE EXISTS the action and
-- answers not found otherwise, as does the verifier's record
-- (ticketCheckRecordSQL; storetest Event/UnknownAction…). The other
-- tables' keys to actions stay: none is on the claim cycle.
ALTER TABLE events DROP CONSTRAINT events_action_id_fkey;

-- +goose Down
ALTER TABLE events ADD CONSTRAINT events_action_id_fkey FOREIGN KEY (action_id) REFERENCES actions (id);
