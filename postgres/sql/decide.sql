-- A staff decision (ActionDecide): the action is locked (decideLockSQL),
-- queue.PlanDecision judges it, and one of the updates writes the plan,
-- conditional on the action still being pending, with its event.

-- name: decideLockSQL
-- decideLockSQL reads the action with its current ticket and locks its
-- row: twenty concurrent approvals of one action queue on the lock and
-- each sees the ones before it.
SELECT {{actionColumns a}},
    {{ticketColumns}}
FROM actions a
{{currentTicket a}} WHERE a.id = $1 FOR UPDATE OF a;

-- name: decideCountSQL
-- decideCountSQL records an approval that does not complete the quorum.
UPDATE actions SET approvals = $2 WHERE id = $1 AND state = 'pending';

-- name: decideApproveSQL
-- decideApproveSQL moves the action to approved with the approved payload.
UPDATE actions SET state = 'approved', decided_by = $2, decided_at = $3,
    decision_note = $4, approved_payload = $5, expires_at = $6, approvals = $7
WHERE id = $1 AND state = 'pending';

-- name: decideFinalSQL
-- decideFinalSQL rejects the action or requests changes ($2), both final.
UPDATE actions SET state = $2, decided_by = $3, decided_at = $4,
    decision_note = $5, finished_at = $4
WHERE id = $1 AND state = 'pending';

-- name: decideEventSQL
-- decideEventSQL appends the decision's event.
INSERT INTO events (action_id, kind, actor, channel, at, data)
VALUES ($1, $2, $3, $4, $5, $6::json);

-- name: decideGrantSQL
-- decideGrantSQL creates the grant an approval asked for and records its
-- event, in the approval's transaction.
WITH g AS (
    INSERT INTO grants (id, tool, agent, fields, granted_by, action_id, created_at, expires_at, max_uses)
    VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9)
)
INSERT INTO events (action_id, kind, actor, channel, at, data)
VALUES ($6, $10, $5, $11, $7, $12::json);
