-- Tickets. The statements that read tickets return the columns
-- scanTicket reads. Every path that changes an action and its tickets
-- locks the action first (ticketLockActionSQL), then the ticket.

-- name: ticketGetByIDSQL
SELECT {{ticketRow}}
FROM tickets t WHERE t.id = $1;

-- name: ticketLockSQL
-- ticketLockSQL reads a ticket and locks it; the action's row must be
-- locked first (ticketLockActionSQL).
SELECT {{ticketRow}}
FROM tickets t WHERE t.id = $1 FOR UPDATE;

-- name: ticketLockActionSQL
-- ticketLockActionSQL locks the action of a ticket: every path that
-- changes an action and its tickets locks the action first, then the
-- ticket, so that they never wait for each other in a circle.
SELECT 1 FROM actions WHERE id = $1 FOR UPDATE;

-- name: ticketActionLockSQL
-- ticketActionLockSQL is ticketLockActionSQL reading the row it locks (with
-- its current ticket): queue.PlanTicketResolution judges from it.
SELECT {{actionColumns a}},
    {{ticketColumns}}
FROM actions a
{{currentTicket a}} WHERE a.id = $1 FOR UPDATE OF a;

-- name: ticketOpenConflictGetSQL
SELECT {{ticketRow}}
FROM tickets t WHERE t.action_id = $1 AND t.kind = 'conflict' AND t.state = 'open';

-- name: ticketListSelect
-- ticketListSelect is what ticketListSQL adds its WHERE clause to.
SELECT {{ticketRow}}
FROM tickets t;

-- name: ticketOpenConflictSQL
-- ticketOpenConflictSQL opens a conflict ticket for action $1 unless one
-- is open (tickets_one_open); then it returns no row and the caller reads
-- the open one (ticketOpenConflictGetSQL).
INSERT INTO tickets (id, action_id, kind, state, opened_at) VALUES (gen_random_uuid(), $1, 'conflict', 'open', $2)
ON CONFLICT DO NOTHING
RETURNING id::text, action_id::text, kind, state, opened_at, resolved_at, resolved_by, outcome, note;

-- name: ticketOpenedEventSQL
-- ticketOpenedEventSQL records that a conflict ticket opened: the domain's
-- event (queue.TicketOpened) as it is, the ticket's id $7 added to its data.
INSERT INTO events (action_id, kind, actor, channel, at, data)
VALUES ($1, $2, $3, $4, $5, (jsonb_build_object('ticket', $7::text) || coalesce($6::jsonb, '{}'))::json);

-- name: ticketCountOpenSQL
SELECT count(*) FROM tickets WHERE state = 'open';

-- name: ticketResolveActionSQL
-- ticketResolveActionSQL writes the move of a resolution's plan
-- (queue.TicketResolution); the locked action is in progress.
UPDATE actions SET state = $2, result = coalesce($3::json, result), error = coalesce($4, error), finished_at = $5
WHERE id = $1 AND state = 'in_progress';

-- name: ticketResolveSQL
UPDATE tickets SET state = 'resolved', resolved_at = $2, resolved_by = $3, outcome = $4, note = $5 WHERE id = $1;

-- name: ticketCheckDueSQL
-- ticketCheckDueSQL claims up to $3 verifier rounds due at $1 for the open
-- tickets of actions of the tools $2 (those with a verifier): a ticket
-- never asked about, or one whose verdict is still unknown and whose next
-- round is due. The tickets are locked FOR UPDATE SKIP LOCKED, so
-- concurrent sweeps take different ones, and the upsert re-checks the
-- schedule on the row another sweep may have just committed, so a round is
-- claimed once. The next round is due after 1, 2, 4 … minutes, at most an
-- hour (queue.VerifyNextDelay).
WITH due AS (
    SELECT t.id FROM tickets t
    JOIN actions a ON a.id = t.action_id
    LEFT JOIN ticket_checks c ON c.ticket_id = t.id
    WHERE t.state = 'open' AND a.tool = ANY($2::text[])
      AND (c.ticket_id IS NULL OR (c.verdict = 'unknown' AND c.next_at <= $1))
    ORDER BY coalesce(c.next_at, t.opened_at), t.id LIMIT $3
    FOR UPDATE OF t SKIP LOCKED
), claimed AS (
    INSERT INTO ticket_checks AS c (ticket_id, checks, next_at)
    SELECT id, 1, $1 + interval '1 minute' FROM due
    ON CONFLICT (ticket_id) DO UPDATE
        SET checks = c.checks + 1, next_at = $1 + least(60, power(2, c.checks)) * interval '1 minute'
        WHERE c.verdict = 'unknown' AND c.next_at <= $1
    RETURNING c.ticket_id
)
SELECT {{ticketRow}}
FROM claimed JOIN tickets t ON t.id = claimed.ticket_id;

-- name: ticketCheckGetSQL
-- ticketCheckGetSQL reads ticket $1's verifier schedule.
SELECT checks, next_at, verdict FROM ticket_checks WHERE ticket_id = $1;

-- name: verifySlotTakeSQL
-- verifySlotTakeSQL takes the agents' slot to ask the verifier of action
-- $1 at $2 if it was never taken or last taken at $3 or before (the
-- interval before $2): the conflicting row is re-checked after a
-- concurrent taker commits, so of several asks at once one takes it. No
-- row when it is held.
INSERT INTO verify_slots AS v (action_id, asked_at) VALUES ($1, $2)
ON CONFLICT (action_id) DO UPDATE SET asked_at = excluded.asked_at WHERE v.asked_at <= $3
RETURNING asked_at;

-- name: verifySlotGetSQL
-- verifySlotGetSQL reads when action $1's slot was last taken.
SELECT asked_at FROM verify_slots WHERE action_id = $1;

-- name: ticketCheckRecordSQL
-- ticketCheckRecordSQL appends a verifier's verified event ($1…$6) and
-- keeps its verdict $8 as the latest of ticket $7 (none when $7 is ''),
-- if the action exists: the count of events appended, 0 when it does not
-- (events.action_id has no foreign key: migration 00028).
WITH ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT $1::uuid, $2::text, $3::text, $4::text, $5::timestamptz, $6::json
    WHERE EXISTS (SELECT 1 FROM actions WHERE id = $1::uuid)
    RETURNING action_id
), chk AS (
    INSERT INTO ticket_checks AS c (ticket_id, next_at, verdict)
    SELECT nullif($7, '')::uuid, $5, $8 FROM ev WHERE nullif($7, '') IS NOT NULL
    ON CONFLICT (ticket_id) DO UPDATE SET verdict = excluded.verdict
)
SELECT count(*)::int FROM ev;
