-- The submission path: the claim-first statements and their batching.
-- Every statement that looks for the holder of an intent key names it as
-- {{held}} (columns.sql): the states queue.HeldStates, written in at
-- generation time, and the class that holds nothing.

-- name: heldWhere
-- heldWhere is held, for a statement built per call (ActionListParams.Held).
{{held}};

-- name: submitSQL
-- submitSQL is claim-first in one statement: insert the action as the
-- holder of its key, or do nothing when a held action (or the same attempt
-- number) exists, and read the holder back. A holder committed after this
-- statement's snapshot is invisible to the read, so the caller retries.
--
-- $21 is the hash of the caller's token, or NULL when the caller checked
-- it: a submission whose token was revoked after the caller last saw it
-- valid claims nothing and reads nothing (tok.token_hash must stay
-- qualified, or it would compare the column with itself).
--
-- A policy rule's decision comes decided ($23-$27: decided_by, decided_at,
-- decision_note, approved_payload, approvals) with its event ($28-$31, its
-- channel $34). The same second event carries an at-least-once upstream
-- call's delivery_started (queue.ActionSubmitParams.Decision), whose
-- action is recorded, not decided, and the approved event of a grant the
-- store picked (grantSubmit: the action comes approved as
-- queue.ApproveByGrant made it, with the grant's id $33, whose use is
-- counted when it has a limit, only when the insert took the intent).
-- With $32 (queue.GrantTry, the grant not picked yet) the statement
-- inserts nothing while the tool has an active grant: queue.PickGrant
-- judges which one applies, so the store reads them and submits again
-- (grantSubmit). A tool without grants costs one probe of
-- grants_active_tool.
--
-- The replay of a holder (rev) is recorded when the submission has the same
-- tool and the same payload text: replayed, or in_progress_refused for an
-- exactly-once claim mid-flight, as queue.Service would. Comparing the
-- text, not the JSON value, keeps the rule exact; a payload equal only as a
-- JSON value (other key order or number spelling) is left to the Service,
-- which compares values.
--
-- A conflict holds its intent: while a conflict ticket is open on the
-- key's latest attempt ({{underReview}}), nothing is inserted and no
-- grant is used; with no holder, review answers that attempt
-- with its open conflict ticket (neither created nor a holder:
-- queue.ActionSubmitResult.UnderReview). Its filters are one-time filters,
-- so a submission that inserted or found its holder never reads it.
--
-- Rows: the action, its current ticket, created, replay recorded.
WITH ins AS (
    INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by,
        channel, created_at, claimed_at, claimed_by, claim_deadline, expires_at, has_webhook,
        spec, warnings, finished_at, decided_by, decided_at, decision_note, approved_payload,
        approvals, grant_id)
    SELECT $1, $2, $3, $4,
        CASE WHEN $3 = 'at-least-once' THEN 1 ELSE
            coalesce((SELECT max(attempt) FROM actions WHERE intent_key = $4 AND class <> 'at-least-once'), 0) + 1 END,
        $5, $6::json, $7, $8, $9, $10, $11, $12, $13, $14, $15::json, $16::json, $20,
        $23, $24, $25, $26::json, $27::json, $33::uuid
    WHERE ($21::text IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = $21::text AND tok.revoked_at IS NULL))
      AND ($3 = 'at-least-once' OR NOT {{underReview $4}})
      AND NOT ($32 AND EXISTS (SELECT 1 FROM grants g WHERE g.tool = $2 AND g.revoked_at IS NULL
          AND g.expires_at > $9 AND (g.max_uses IS NULL OR g.uses < g.max_uses)))
    ON CONFLICT DO NOTHING
    RETURNING *
), used AS (
    UPDATE grants g SET uses = g.uses + 1 FROM ins WHERE g.id = ins.grant_id AND g.max_uses IS NOT NULL
), ev AS (
    {{submissionEvents}}
    FROM ins CROSS JOIN LATERAL (VALUES
        (1, $17::text, $18::text, $8::text, $19::json, $22::boolean),
        (2, $28::text, $29::text, $34::text, $30::json, $31::boolean)
    ) e(n, kind, actor, channel, data, fanned_out)
    WHERE e.kind IS NOT NULL ORDER BY e.n
), holder AS (
    SELECT a.* FROM actions a
    WHERE $3 <> 'at-least-once' AND a.intent_key = $4 AND {{held}}
      AND NOT EXISTS (SELECT 1 FROM ins)
      AND ($21::text IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = $21::text AND tok.revoked_at IS NULL))
), rev AS (
    INSERT INTO events (action_id, kind, actor, channel, at)
    SELECT h.id, CASE WHEN h.state = 'in_progress' AND h.class = 'exactly-once'
        THEN 'in_progress_refused' ELSE 'replayed' END, $18, $8, $9
    FROM holder h WHERE h.tool = $2 AND h.payload::text = $6::text
), review AS (
    SELECT l.* FROM (
        SELECT a.* FROM actions a WHERE a.intent_key = $4 AND a.class <> 'at-least-once'
        ORDER BY a.attempt DESC LIMIT 1
    ) l
    WHERE $3 <> 'at-least-once' AND NOT EXISTS (SELECT 1 FROM ins) AND NOT EXISTS (SELECT 1 FROM holder)
      AND ($21::text IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = $21::text AND tok.revoked_at IS NULL))
)
SELECT {{actionColumns ins}},
    {{noTicket}},
    true, false
FROM ins
UNION ALL
SELECT {{actionColumns h}},
    {{ticketColumns}},
    false, h.tool = $2 AND h.payload::text = $6::text
FROM holder h
{{currentTicket h}}
UNION ALL
SELECT {{actionColumns r}},
    {{ticketColumns}},
    false, false
FROM review r JOIN tickets t ON t.action_id = r.id AND t.kind = 'conflict' AND t.state = 'open';

-- fragment: underReview
-- underReview is true while a conflict ticket is open on the latest
-- attempt of the intent key {{.}} (the highest attempt number of a class
-- other than at-least-once): its effect may have happened twice, so no new
-- attempt is claimed until an operator resolves the ticket. The attempt is
-- read backwards on actions_intent_attempt, its ticket on tickets_one_open.
EXISTS (SELECT 1 FROM (
        SELECT r.id FROM actions r WHERE r.intent_key = {{.}} AND r.class <> 'at-least-once'
        ORDER BY r.attempt DESC LIMIT 1
    ) l JOIN tickets rt ON rt.action_id = l.id
    WHERE rt.kind = 'conflict' AND rt.state = 'open')

-- fragment: submissionEvents
-- submissionEvents inserts a new action's events in the order of e.n, so
-- their ids follow it: submitted, then a rule's decision or a grant's
-- approval.
INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
    SELECT ins.id, e.kind, e.actor, e.channel, ins.created_at, e.data, e.fanned_out

-- name: submitManySQL
-- submitManySQL is submitSQL for the submissions of a batch, in one
-- statement, with one array per column and the index of the submission in
-- the batch first in each row: each row is inserted as the holder of its
-- key unless one is held, in the order of the input (the batch's lock
-- order). A submission whose key another of the same batch took gets no
-- row: its holder is invisible to this statement, so it retries on its own,
-- like any submission that lost a race. So does one a grant may approve
-- while its tool has an active grant (grantSubmit picks and locks it). And
-- so does one whose intent is under review ({{underReview}}): submitSQL
-- answers it with the ticket.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[], $11::text[], $12::timestamptz[],
        $13::timestamptz[], $14::boolean[], $15::text[], $16::text[], $17::text[], $18::text[],
        $19::text[], $20::timestamptz[], $21::text[], $22::boolean[], $23::text[], $24::timestamptz[],
        $25::text[], $26::text[], $27::text[], $28::text[], $29::text[], $30::text[], $31::boolean[],
        $32::boolean[], $33::text[]) WITH ORDINALITY
    AS i(id, tool, class, intent_key, state, payload, requested_by, channel, created_at, claimed_at,
        claimed_by, claim_deadline, expires_at, has_webhook, spec, warnings, ev_kind, ev_actor,
        ev_data, finished_at, token_hash, ev_unrouted, decided_by, decided_at, decision_note,
        approved_payload, approvals, dec_kind, dec_actor, dec_data, dec_unrouted, grant_try,
        dec_channel, n)
    WHERE (i.token_hash IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = i.token_hash AND tok.revoked_at IS NULL))
), ins AS (
    INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by,
        channel, created_at, claimed_at, claimed_by, claim_deadline, expires_at, has_webhook,
        spec, warnings, finished_at, decided_by, decided_at, decision_note, approved_payload,
        approvals)
    SELECT i.id, i.tool, i.class, i.intent_key,
        CASE WHEN i.class = 'at-least-once' THEN 1 ELSE
            coalesce((SELECT max(a.attempt) FROM actions a WHERE a.intent_key = i.intent_key AND a.class <> 'at-least-once'), 0) + 1 END,
        i.state, i.payload::json, i.requested_by, i.channel, i.created_at, i.claimed_at, i.claimed_by,
        i.claim_deadline, i.expires_at, i.has_webhook, i.spec::json, i.warnings::json, i.finished_at,
        i.decided_by, i.decided_at, i.decision_note, i.approved_payload::json, i.approvals::json
    FROM input i
    WHERE (i.class = 'at-least-once' OR NOT {{underReview i.intent_key}})
      AND NOT (i.grant_try AND EXISTS (SELECT 1 FROM grants g WHERE g.tool = i.tool AND g.revoked_at IS NULL
          AND g.expires_at > i.created_at AND (g.max_uses IS NULL OR g.uses < g.max_uses)))
    ORDER BY i.n
    ON CONFLICT DO NOTHING
    RETURNING *
), ev AS (
    {{submissionEvents}}
    FROM ins JOIN input i ON i.id = ins.id CROSS JOIN LATERAL (VALUES
        (1, i.ev_kind, i.ev_actor, ins.channel, i.ev_data::json, i.ev_unrouted),
        (2, i.dec_kind, i.dec_actor, i.dec_channel, i.dec_data::json, i.dec_unrouted)
    ) e(n, kind, actor, channel, data, fanned_out)
    WHERE e.kind IS NOT NULL ORDER BY i.n, e.n
), holder AS (
    SELECT i.n, i.tool AS in_tool, i.payload AS in_payload, i.ev_actor, i.channel AS in_channel,
        i.created_at AS in_at, a.*
    FROM input i
    CROSS JOIN LATERAL ({{holderOf i}}) a
    WHERE i.class <> 'at-least-once' AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = i.id)
), rev AS (
    INSERT INTO events (action_id, kind, actor, channel, at)
    SELECT h.id, CASE WHEN h.state = 'in_progress' AND h.class = 'exactly-once'
        THEN 'in_progress_refused' ELSE 'replayed' END, h.ev_actor, h.in_channel, h.in_at
    FROM holder h WHERE h.tool = h.in_tool AND h.payload::text = h.in_payload
    ORDER BY h.n
)
SELECT i.n::int - 1, {{actionColumns ins}},
    {{noTicket}},
    true, false
FROM ins JOIN input i ON i.id = ins.id
UNION ALL
SELECT h.n::int - 1, {{actionColumns h}},
    {{ticketColumns}},
    false, h.tool = h.in_tool AND h.payload::text = h.in_payload
FROM holder h
{{currentTicket h}};

-- fragment: holderOf
-- holderOf is the holder of the intent key of the input row {{.}}: at most
-- one, as actions_held_intent is unique. A lateral probe per input row, and
-- LIMIT 1 keeps the planner from flattening it into a join: on a table the
-- planner has no statistics for yet (a new database until autovacuum's
-- first ANALYZE), a join of the batch with actions was planned as a scan of
-- the whole table, and the generic plan the connection cached kept
-- scanning as the table grew (every new submission paid for every row
-- before it: docs/performance.md, "A plan for an empty table"). One probe
-- per row has nothing cheaper than the index.
SELECT a.* FROM actions a WHERE a.intent_key = {{.}}.intent_key AND {{held}} LIMIT 1

-- fragment: replayLookupInput
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
        $6::timestamptz[], $7::text[]) WITH ORDINALITY
    AS i(intent_key, tool, payload, ev_actor, channel, created_at, token_hash, n)
    WHERE (i.token_hash IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = i.token_hash AND tok.revoked_at IS NULL))
), holder AS (
    SELECT i.n, i.tool AS in_tool, i.payload AS in_payload, i.ev_actor, i.channel AS in_channel,
        i.created_at AS in_at, a.*
    FROM input i
    CROSS JOIN LATERAL ({{holderOf i}}) a
), rev AS (
    INSERT INTO events (action_id, kind, actor, channel, at)
    SELECT h.id, CASE WHEN h.state = 'in_progress' AND h.class = 'exactly-once'
        THEN 'in_progress_refused' ELSE 'replayed' END, h.ev_actor, h.in_channel, h.in_at
    FROM holder h WHERE h.tool = h.in_tool AND h.payload::text = h.in_payload
    ORDER BY h.n
)

-- name: replayLookupManySQL
-- replayLookupManySQL is the holder half of submitManySQL, for submissions
-- whose key this process recently saw held (heldHint): it reads the holder
-- and records the replay exactly as submitManySQL would, and inserts no
-- action. A submission it returns no row for (no holder any more, or the
-- token guard refused) then runs the claiming statement. Without the
-- INSERT into actions, PostgreSQL skips what a claim sets up even when it
-- conflicts (ten indexes, the CHECK constraints, the conflict checks, the
-- attempt number): 73 us per replay instead of 210 us in batches of four
-- (docs/performance.md).
{{replayLookupInput}}
SELECT h.n::int - 1, {{actionColumns h}},
    {{ticketColumns}},
    false, h.tool = h.in_tool AND h.payload::text = h.in_payload
FROM holder h
{{currentTicket h}};

-- name: replayLookupOneSQL
-- replayLookupOneSQL is replayLookupManySQL for one submission, without
-- the index column.
{{replayLookupInput}}
SELECT {{actionColumns h}},
    {{ticketColumns}},
    false, h.tool = h.in_tool AND h.payload::text = h.in_payload
FROM holder h
{{currentTicket h}};
