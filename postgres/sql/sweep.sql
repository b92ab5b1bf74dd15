-- The sweep's statements (maintenance.Sweeper): each takes what is due at
-- $1, at most $2, with FOR NO KEY UPDATE SKIP LOCKED, so several sweepers
-- share the work instead of queueing behind each other, and re-checks the
-- state of the rows it locked. NO KEY UPDATE, not UPDATE: inserting an
-- event or a notification that references an action takes a key share
-- lock on it, which must not make the sweep pass the action over. Each
-- writes the event the domain gave (queue.DueParams.Event: $3 kind, $4
-- actor, $5 channel, $6 at, $7 data), adding only the action's id (and a
-- ticket's to its data).

-- name: actionExpireDueSQL
-- actionExpireDueSQL expires up to $2 pending and approved actions whose
-- expires_at is at or before $1, with the event $3…$7 each; $4, the
-- event's actor, decides a pending one.
WITH due AS (
    SELECT id FROM actions
    WHERE state IN ('pending', 'approved') AND expires_at <= $1
    ORDER BY expires_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED
), upd AS (
    UPDATE actions a SET state = 'expired', finished_at = $1,
        decided_by = CASE WHEN a.state = 'pending' THEN $4::text ELSE a.decided_by END,
        decided_at = CASE WHEN a.state = 'pending' THEN $1 ELSE a.decided_at END
    FROM due WHERE a.id = due.id AND a.state IN ('pending', 'approved')
    RETURNING a.*
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT id, $3::text, $4::text, $5::text, $6::timestamptz, $7::json FROM upd
)
SELECT {{actionColumns upd}},
    {{noTicket}}
FROM upd;

-- name: ticketOpenStaleSQL
-- ticketOpenStaleSQL opens a stale ticket for up to $2 in_progress actions
-- whose claim deadline is at or before $1 and that have no open one. The
-- partial unique index tickets_one_open makes concurrent sweeps open one
-- ticket, not several. Each is written with the event $3…$7, the ticket's
-- id added to its data.
WITH due AS (
    SELECT a.id FROM actions a
    WHERE a.state = 'in_progress' AND a.claim_deadline <= $1
      AND NOT EXISTS (SELECT 1 FROM tickets t WHERE t.action_id = a.id AND t.kind = 'stale' AND t.state = 'open')
    ORDER BY a.claim_deadline LIMIT $2
    -- Lock the claims: a late report finishing one meanwhile waits, and a
    -- claim finished before the lock is re-checked and skipped.
    FOR NO KEY UPDATE OF a SKIP LOCKED
), ins AS (
    INSERT INTO tickets (id, action_id, kind, state, opened_at)
    SELECT gen_random_uuid(), id, 'stale', 'open', $1 FROM due
    ON CONFLICT DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT action_id, $3::text, $4::text, $5::text, $6::timestamptz,
        (jsonb_build_object('ticket', id::text) || coalesce($7::jsonb, '{}'))::json
    FROM ins
)
SELECT id::text, action_id::text, kind, state, opened_at, resolved_at, resolved_by, outcome, note FROM ins;

-- fragment: approvalAfter
-- approvalAfter is the duration {{.}} of the action's approval rule
-- (nanoseconds in the tool snapshot) as an interval.
((a.spec->'approval'->>'{{.}}')::bigint / 1000) * interval '1 microsecond'

-- name: remindDueSQL
-- remindDueSQL reminds every pending action whose remind_after has passed
-- since its last reminder (or its submission). FOR UPDATE re-checks the
-- condition on the row a concurrent sweep just updated, and SKIP LOCKED
-- passes over the rows it holds, so each interval sends one reminder.
WITH due AS (
    SELECT a.id FROM actions a
    WHERE a.state = 'pending' AND a.spec->'approval'->>'remind_after' IS NOT NULL
      AND coalesce(a.reminded_at, a.created_at) + {{approvalAfter remind_after}} <= $1
    ORDER BY a.created_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED
), upd AS (
    UPDATE actions a SET reminded_at = $1 FROM due WHERE a.id = due.id AND a.state = 'pending' RETURNING a.id
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT id, $3::text, $4::text, $5::text, $6::timestamptz, $7::json FROM upd
)
SELECT count(*) FROM upd;

-- name: escalateDueSQL
-- escalateDueSQL escalates, once, every pending action whose
-- escalate_after has passed since its submission.
WITH due AS (
    SELECT a.id FROM actions a
    WHERE a.state = 'pending' AND a.escalated_at IS NULL AND a.spec->'approval'->>'escalate_after' IS NOT NULL
      AND a.created_at + {{approvalAfter escalate_after}} <= $1
    ORDER BY a.created_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED
), upd AS (
    UPDATE actions a SET escalated_at = $1 FROM due WHERE a.id = due.id AND a.state = 'pending' AND a.escalated_at IS NULL
    RETURNING a.id
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT id, $3::text, $4::text, $5::text, $6::timestamptz, $7::json FROM upd
)
SELECT count(*) FROM upd;
