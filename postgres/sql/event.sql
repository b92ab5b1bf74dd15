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

-- name: eventListSelect
-- eventListSelect is what eventListSQL adds its WHERE clause to.
SELECT id, coalesce(action_id::text, ''), coalesce(subject, ''), kind, actor, channel, at, data FROM events;
