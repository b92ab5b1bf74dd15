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
-- The replay of a holder (rev) is recorded when the submission has the same
-- tool and the same payload text: replayed, or in_progress_refused for an
-- exactly-once claim mid-flight, as queue.Service would. Comparing the
-- text, not the JSON value, keeps the rule exact; a payload equal only as a
-- JSON value (other key order or number spelling) is left to the Service,
-- which compares values.
--
-- Rows: the action, its current ticket, created, replay recorded.
WITH ins AS (
    INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by,
        channel, created_at, claimed_at, claimed_by, claim_deadline, expires_at, has_webhook,
        spec, warnings, finished_at)
    SELECT $1, $2, $3, $4,
        CASE WHEN $3 = 'at-least-once' THEN 1 ELSE
            coalesce((SELECT max(attempt) FROM actions WHERE intent_key = $4 AND class <> 'at-least-once'), 0) + 1 END,
        $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $20
    WHERE ($21::text IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = $21::text AND tok.revoked_at IS NULL))
    ON CONFLICT DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
    SELECT id, $17, $18, $8, $9, $19, $22 FROM ins
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
{{currentTicket h}};

-- name: submitManySQL
-- submitManySQL is submitSQL for the submissions of a batch, in one
-- statement, with one array per column and the index of the submission in
-- the batch first in each row: each row is inserted as the holder of its
-- key unless one is held, in the order of the input (the batch's lock
-- order). A submission whose key another of the same batch took gets no
-- row: its holder is invisible to this statement, so it retries on its own,
-- like any submission that lost a race.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[], $11::text[], $12::timestamptz[],
        $13::timestamptz[], $14::boolean[], $15::text[], $16::text[], $17::text[], $18::text[],
        $19::text[], $20::timestamptz[], $21::text[], $22::boolean[]) WITH ORDINALITY
    AS i(id, tool, class, intent_key, state, payload, requested_by, channel, created_at, claimed_at,
        claimed_by, claim_deadline, expires_at, has_webhook, spec, warnings, ev_kind, ev_actor,
        ev_data, finished_at, token_hash, ev_unrouted, n)
    WHERE (i.token_hash IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok WHERE tok.token_hash = i.token_hash AND tok.revoked_at IS NULL))
), ins AS (
    INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload, requested_by,
        channel, created_at, claimed_at, claimed_by, claim_deadline, expires_at, has_webhook,
        spec, warnings, finished_at)
    SELECT id, tool, class, intent_key,
        CASE WHEN class = 'at-least-once' THEN 1 ELSE
            coalesce((SELECT max(a.attempt) FROM actions a WHERE a.intent_key = i.intent_key AND a.class <> 'at-least-once'), 0) + 1 END,
        state, payload::json, requested_by, channel, created_at, claimed_at, claimed_by,
        claim_deadline, expires_at, has_webhook, spec::json, warnings::json, finished_at
    FROM input i ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
    SELECT ins.id, i.ev_kind, i.ev_actor, ins.channel, ins.created_at, i.ev_data::json, i.ev_unrouted
    FROM ins JOIN input i ON i.id = ins.id
), holder AS (
    SELECT i.n, i.tool AS in_tool, i.payload AS in_payload, i.ev_actor, i.channel AS in_channel,
        i.created_at AS in_at, a.*
    FROM input i
    JOIN actions a ON a.intent_key = i.intent_key AND {{held}}
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
    JOIN actions a ON a.intent_key = i.intent_key AND {{held}}
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
