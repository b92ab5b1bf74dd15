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
-- ticketOpenedEventSQL records that a conflict ticket opened.
INSERT INTO events (action_id, kind, actor, channel, at, data) VALUES ($1, 'ticket_opened', 'system', '', $2, $3);

-- name: ticketCountOpenSQL
SELECT count(*) FROM tickets WHERE state = 'open';

-- name: ticketResolveActionSQL
-- ticketResolveActionSQL writes the move of a resolution's plan
-- (queue.TicketResolution); the locked action is in progress.
UPDATE actions SET state = $2, result = coalesce($3::json, result), error = coalesce($4, error), finished_at = $5
WHERE id = $1 AND state = 'in_progress';

-- name: ticketResolveSQL
UPDATE tickets SET state = 'resolved', resolved_at = $2, resolved_by = $3, outcome = $4, note = $5 WHERE id = $1;
