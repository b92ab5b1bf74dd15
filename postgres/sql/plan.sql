-- Plans (queue.Plan): proposed, read, decided and cancelled by conditional
-- updates of the plan's row, and their steps used by submissions
-- (planSubmit in plan.go).

-- name: planInsertSQL
INSERT INTO plans (id, title, agent, ordered, state, created_at, expires_at, approvals_required,
    approvals, decided_by, decided_at, decision_note)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::json, $10, $11, $12);

-- name: planStepInsertSQL
INSERT INTO plan_steps (plan_id, n, tool, class, intent_key, payload, decision, rule, warnings, approval)
VALUES ($1, $2, $3, $4, $5, $6::json, $7, $8, $9::json, $10::json);


-- name: planGetSQL
SELECT id::text, title, agent, ordered, state, created_at, expires_at, approvals_required,
    approvals::text, decided_by, decided_at, decision_note, version, reminded_at, escalated_at
FROM plans WHERE id = $1;

-- fragment: planDone
-- planDone holds for the plan {{.}} when every step's action is finished
-- (queue.FinalStates): an approved plan so is done.
NOT EXISTS (SELECT 1 FROM plan_steps ds LEFT JOIN actions da ON da.id = ds.action_id
    WHERE ds.plan_id = {{.}}.id AND (da.id IS NULL OR da.state NOT IN ({{finalStates}})))

-- name: planListSQL
-- planListSQL lists plans in the state $1 as queue.Plan.Settle reads it at
-- $2 (all when ''), newest first, after the cursor ($4, $5) when $4 is
-- set: done is computed, and expired is stored by the sweep or due since
-- the last one.
SELECT id::text, title, agent, ordered, state, created_at, expires_at, approvals_required,
    approvals::text, decided_by, decided_at, decision_note, version, reminded_at, escalated_at
FROM plans p
WHERE CASE $1::text
    WHEN '' THEN true
    WHEN 'pending' THEN p.state = 'pending' AND p.expires_at > $2
    WHEN 'approved' THEN p.state = 'approved' AND p.expires_at > $2 AND NOT {{planDone p}}
    WHEN 'done' THEN p.state = 'approved' AND {{planDone p}}
    WHEN 'expired' THEN p.state = 'expired'
        OR p.state IN ('pending', 'approved') AND p.expires_at <= $2 AND NOT {{planDone p}}
    ELSE p.state = $1::text END
  AND ($4::timestamptz IS NULL OR (p.created_at, p.id) < ($4::timestamptz, $5::uuid))
ORDER BY p.created_at DESC, p.id DESC LIMIT $3;

-- name: planStepsSQL
-- planStepsSQL reads the steps of the plans $1 with their actions' states
-- and current tickets.
SELECT s.plan_id::text, s.n, s.tool, s.class, s.intent_key, s.payload::text, s.decision, s.rule,
    s.warnings::text, s.approval::text, coalesce(s.action_id::text, ''), coalesce(a.state, ''),
    coalesce(t.id::text, ''), coalesce(t.kind, ''), coalesce(t.state, '')
FROM plan_steps s LEFT JOIN actions a ON a.id = s.action_id
{{currentTicket a}}
WHERE s.plan_id = ANY($1::uuid[]) ORDER BY s.plan_id, s.n;

-- name: planUpdateSQL
-- planUpdateSQL writes a decision or a cancellation only if the plan is
-- still the version the Service judged ($2), and with $8 only while no
-- step was used. A step's submission bumps the version in its own
-- transaction first (planLockSQL), so an update racing it waits for the
-- row lock and then finds another version.
WITH up AS (
    UPDATE plans SET state = $3, approvals = $4::json, decided_by = $5, decided_at = $6,
        decision_note = $7, version = version + 1
    WHERE id = $1 AND version = $2
      AND (NOT $8 OR NOT EXISTS (SELECT 1 FROM plan_steps s WHERE s.plan_id = $1 AND s.action_id IS NOT NULL))
    RETURNING id
), ev AS (
    INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
    SELECT NULL, $9, $10, $11, $12, $13, $14::json, $15 FROM up
)
SELECT count(*)::int FROM up;

-- name: planEventInsertSQL
-- planEventInsertSQL records a plan's proposal; $7 false leaves it
-- to the outbox's fan-out (a pending plan's channels hear of it).
INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
VALUES (NULL, $1, $2, $3, $4, $5, $6::json, $7);

-- name: planRemindMarkSQL
-- planRemindMarkSQL records a reminder of a pending plan, only while its
-- reminded_at is still $3 (the sweep's read), with its event.
WITH up AS (
    UPDATE plans SET reminded_at = $2
    WHERE id = $1 AND state = 'pending' AND reminded_at IS NOT DISTINCT FROM $3
    RETURNING id
), ev AS (
    INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
    SELECT NULL, $4, $5, $6, '', $2, NULL, $7 FROM up
)
SELECT count(*)::int FROM up;

-- name: planEscalateMarkSQL
-- planEscalateMarkSQL records the one escalation of a pending plan.
WITH up AS (
    UPDATE plans SET escalated_at = $2
    WHERE id = $1 AND state = 'pending' AND escalated_at IS NOT DISTINCT FROM $3
    RETURNING id
), ev AS (
    INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
    SELECT NULL, $4, $5, $6, '', $2, NULL, $7 FROM up
)
SELECT count(*)::int FROM up;

-- name: planLockSQL
-- planLockSQL takes the plan's row for a step's submission: only while it
-- is approved and unexpired at $2. It bumps the version, so decisions and
-- cancellations judged before it are refused (planUpdateSQL), and
-- concurrent submissions of its steps queue on the row.
UPDATE plans SET version = version + 1
WHERE id = $1 AND state = 'approved' AND expires_at > $2
RETURNING ordered;

-- name: planStepClaimSQL
-- planStepClaimSQL uses step $2 of plan $1 for the action $3: only an
-- unused step, and for an ordered plan ($4) only when every earlier step's
-- action is done or recorded. It runs after the plan's row is locked, in
-- a statement of its own, so it reads what committed before the lock.
UPDATE plan_steps SET action_id = $3
WHERE plan_id = $1 AND n = $2 AND action_id IS NULL
  AND (NOT $4 OR NOT EXISTS (
      SELECT 1 FROM plan_steps e LEFT JOIN actions a ON a.id = e.action_id
      WHERE e.plan_id = $1 AND e.n < $2 AND (a.id IS NULL OR a.state NOT IN ('done', 'recorded'))));

-- name: planTokenActiveSQL
-- planTokenActiveSQL tells a step's submission refused by the token guard
-- from one that lost a race with a holder.
SELECT EXISTS (SELECT 1 FROM agent_tokens WHERE token_hash = $1 AND revoked_at IS NULL);

-- name: planExpireDueSQL
-- planExpireDueSQL expires up to $2 pending plans, and approved ones not
-- done, whose expires_at is at or before $1, with the domain's event
-- (queue.PlanExpiryDue: $3 kind, $4 actor, who decides a pending plan, $5
-- channel, $6 at, $7 data) each (sealed like every event; the outbox fans out a pending plan's, so
-- the channels that told of it hear plan.expired, and not an approved
-- one's, whose messages already say it was approved). FOR NO KEY UPDATE
-- SKIP LOCKED lets concurrent sweeps share the plans, and the re-checked
-- state expires each once; a step's submission holding the row
-- (planLockSQL) is passed over until the next sweep, and one waiting for
-- it finds the plan expired. The version moves, so a decision judged
-- before is refused (planUpdateSQL). NO KEY UPDATE, not UPDATE: a row
-- that references the plan (a notification, a chat message) takes a key
-- share lock on it, which must not make the sweep pass the plan over.
WITH due AS (
    SELECT p.id, p.state FROM plans p
    WHERE p.state IN ('pending', 'approved') AND p.expires_at <= $1 AND NOT {{planDone p}}
    ORDER BY p.expires_at LIMIT $2 FOR NO KEY UPDATE OF p SKIP LOCKED
), upd AS (
    UPDATE plans p SET state = 'expired', version = p.version + 1,
        decided_by = CASE WHEN p.state = 'pending' THEN $4::text ELSE p.decided_by END,
        decided_at = CASE WHEN p.state = 'pending' THEN $1 ELSE p.decided_at END
    FROM due WHERE p.id = due.id AND p.state IN ('pending', 'approved')
    RETURNING p.id, due.state = 'approved' AS was_approved
), ev AS (
    INSERT INTO events (action_id, subject, kind, actor, channel, at, data, fanned_out)
    SELECT NULL, 'plan:' || id::text, $3::text, $4::text, $5::text, $6::timestamptz, $7::json, was_approved FROM upd
)
SELECT id::text FROM upd;
