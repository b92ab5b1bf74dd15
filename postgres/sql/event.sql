-- The timeline's events.

-- name: eventInsertSQL
-- eventInsertSQL appends one event that changes no state.
INSERT INTO events (action_id, kind, actor, channel, at, data) VALUES ($1, $2, $3, $4, $5, $6);

-- name: eventInsertManySQL
-- eventInsertManySQL is eventInsertSQL for the events of a batch, one
-- array per column.
INSERT INTO events (action_id, kind, actor, channel, at, data)
SELECT id, kind, actor, channel, at, data::json
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[]) AS e(id, kind, actor, channel, at, data);

-- name: staffEventInsertSQL
-- staffEventInsertSQL appends an event of no action about a subject (a
-- sign-in, a user or token change), which notifies nobody.
INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
VALUES (NULL, nullif($1, ''), $2, $3, $4, $5, $6::json, true);

-- name: eventListSelect
-- eventListSelect is what eventListSQL adds its WHERE clause to; a staff
-- event's action is "", an action's event's subject "".
SELECT id, coalesce(action_id::text, ''), coalesce(subject, ''), kind, actor, channel, at, data FROM events;
