-- The timeline's events.

-- name: eventInsertSQL
-- eventInsertSQL appends one event that changes no state, to an action
-- that exists: no row, none does (events.action_id has no foreign key:
-- migration 00028). Actions are never deleted, so the read needs no lock.
INSERT INTO events (action_id, kind, actor, channel, at, data)
SELECT $1::uuid, $2::text, $3::text, $4::text, $5::timestamptz, $6::json
WHERE EXISTS (SELECT 1 FROM actions WHERE id = $1::uuid)
RETURNING 0;

-- name: eventInsertManySQL
-- eventInsertManySQL is eventInsertSQL for the events of a batch, one
-- array per column: a row for each event appended, the index of its call
-- in the batch first.
WITH e AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[])
        WITH ORDINALITY AS e(id, kind, actor, channel, at, data, n)
    WHERE EXISTS (SELECT 1 FROM actions a WHERE a.id = e.id)
), ins AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT id, kind, actor, channel, at, data::json FROM e ORDER BY n
)
SELECT n::int - 1, 0 FROM e;

-- name: staffEventInsertSQL
-- staffEventInsertSQL appends an event of no action about a subject (a
-- sign-in, a user or token change), which notifies nobody.
INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
VALUES (NULL, nullif($1, ''), $2, $3, $4, $5, $6::json, true);

-- name: eventListSelect
-- eventListSelect is what eventListSQL adds its WHERE clause to; a staff
-- event's action is "", an action's event's subject "".
SELECT id, coalesce(action_id::text, ''), coalesce(subject, ''), kind, actor, channel, at, data FROM events;
