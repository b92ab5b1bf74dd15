-- The outbox's notifications (maintenance.Outbox) and the messages the
-- channels sent for actions.

-- name: fanOutSQL
-- fanOutSQL takes the waiting outbox events. Its predicate repeats the
-- partial index events_fan_out's, so the scan reads only that index, and
-- SKIP LOCKED lets several processes share the work.
SELECT id, coalesce(action_id::text, ''), coalesce(subject, ''), kind, actor, channel, at, data FROM events
WHERE NOT fanned_out AND kind IN ({{notifyingKinds}})
ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED;

-- name: notificationInsertSQL
-- notificationInsertSQL adds one channel's notification of an event, once.
INSERT INTO notifications (id, event_id, action_id, type, channel, kind, state, created_at, due_at)
VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8) ON CONFLICT (event_id, channel) DO NOTHING;

-- name: planNotificationInsertSQL
-- planNotificationInsertSQL adds one channel's notification of a plan's
-- event, once.
INSERT INTO notifications (id, event_id, plan_id, type, channel, kind, state, created_at, due_at)
VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8) ON CONFLICT (event_id, channel) DO NOTHING;

-- name: fannedOutSQL
UPDATE events SET fanned_out = true WHERE id = ANY($1);

-- name: notificationClaimSQL
-- notificationClaimSQL takes the due rows (SKIP LOCKED) and moves them a
-- lease ahead ($2), so once it commits no other sender finds them due.
WITH due AS (
    SELECT id FROM notifications WHERE state = 'pending' AND due_at <= $1
    ORDER BY due_at LIMIT $3 FOR UPDATE SKIP LOCKED
), n AS (
    UPDATE notifications n SET due_at = $2, attempts = n.attempts + 1
    FROM due WHERE n.id = due.id AND n.state = 'pending'
    RETURNING n.*
)
SELECT {{notificationColumns}} FROM n JOIN events e ON e.id = n.event_id ORDER BY n.created_at;

-- name: notificationSettleSQL
-- notificationSettleSQL ends an attempt, unless the row moved on (another
-- sender's lease, another attempt).
UPDATE notifications SET state = $3, due_at = $4, delivered_at = $5,
    last_error = coalesce($6, last_error)
WHERE id = $1 AND state = 'pending' AND attempts = $2;

-- name: notificationListSQL
SELECT {{notificationColumns}} FROM notifications n JOIN events e ON e.id = n.event_id
WHERE n.action_id = $1 ORDER BY n.event_id, n.channel;

-- name: notificationCountPendingSQL
SELECT count(*) FROM notifications WHERE state = 'pending';

-- name: channelMessageAddSQL
INSERT INTO channel_messages (action_id, kind, address, ref, sent_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING;

-- name: channelMessageListSQL
SELECT action_id::text, kind, address, ref, sent_at FROM channel_messages
WHERE action_id = $1 ORDER BY sent_at, kind, address, ref;

-- name: channelMessagesOfSQL
-- channelMessagesOfSQL reads the messages of the fan-out's batch of
-- actions, so that a decision reaches every channel that told of one.
SELECT action_id::text, kind, address, ref, sent_at FROM channel_messages
WHERE action_id = ANY($1::uuid[]) ORDER BY sent_at, kind, address, ref;

-- name: planMessageAddSQL
INSERT INTO plan_messages (plan_id, kind, address, ref, sent_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING;

-- name: planMessageListSQL
SELECT plan_id::text, kind, address, ref, sent_at FROM plan_messages
WHERE plan_id = $1 ORDER BY sent_at, kind, address, ref;
