-- The pieces of actionTransitionSQL, the one builder of a transition (its
-- variants: testdata/action_transition.golden).

-- name: movedColumns
-- movedColumns are a transition's answer's: the updated row u.
{{actionColumns u}};

-- name: ticketColumns
-- ticketColumns follow the action's in every answer.
{{ticketColumns}};

-- name: reportManySQL
-- reportManySQL is actionTransitionSQL for the agents' reports of a batch
-- (reportable: a complete or a fail of an agent's own claim, its token
-- checked when given, a stale ticket resolved by a late report), in one
-- statement, with one array per column and the index of the report in the
-- batch first in each row. A report whose action moved otherwise (another
-- report of the same batch moved it, another agent holds it, its token was
-- revoked) gets no row and reads the action after the commit, as a
-- transition that moved nothing does. The planner joins the few rows of a
-- batch by primary key in the order of the input, the batch's lock order;
-- should two batches ever lock two actions in opposite orders, PostgreSQL
-- refuses one of them as a deadlock and its reports run again one by one,
-- as those of any refused batch. The key is the only condition on actions
-- an index can serve: the state the reports move from ($19, in_progress)
-- is compared as an expression (|| ''), or the planner may read every
-- claim through an index over states (actions_claim_due, or
-- actions_state_created) for the batch's few rows when its statistics
-- count few claims (TestReportsMergeOnlyWithStatistics). The store merges
-- reports only once the statistics count a table of some size
-- (reportMerging). Each report's stale ticket resolution
-- (queue.StaleResolution) comes in arrays $13 to $18, written as it is,
-- its data with the ticket's id added; tkev reads ev, so that an action's
-- outcome event is written before its ticket_resolved.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::text[], $5::text[],
        $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
        $12::boolean[], $13::text[], $14::timestamptz[], $15::text[], $16::text[], $17::text[],
        $18::text[]) WITH ORDINALITY
    AS i(id, state, at, result, error, requested_by, token_hash, ev_kind, ev_actor, ev_channel,
        ev_data, ev_unrouted, tk_by, tk_at, tk_channel, tk_outcome, tk_note, tk_data, n)
), upd AS (
    UPDATE actions a SET state = i.state,
        result = CASE WHEN i.result IS NULL THEN a.result ELSE i.result::json END,
        error = CASE WHEN i.error IS NULL THEN a.error ELSE i.error END,
        finished_at = i.at
    FROM input i
    WHERE a.id = i.id AND a.state || '' = ANY($19) AND a.requested_by = i.requested_by
      AND NOT a.has_webhook
      AND (i.token_hash IS NULL OR EXISTS (SELECT 1 FROM agent_tokens tok
          WHERE tok.token_hash = i.token_hash AND tok.revoked_at IS NULL))
    RETURNING a.*, i.n AS in_n, i.at AS in_at, i.ev_kind, i.ev_actor, i.ev_channel, i.ev_data,
        i.ev_unrouted, i.tk_by, i.tk_at, i.tk_channel, i.tk_outcome, i.tk_note, i.tk_data
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
    SELECT id, ev_kind, ev_actor, ev_channel, in_at, ev_data::json, ev_unrouted FROM upd ORDER BY in_n
    RETURNING action_id
), tk AS (
    UPDATE tickets t SET state = 'resolved', resolved_at = u.tk_at, resolved_by = u.tk_by,
        outcome = u.tk_outcome, note = u.tk_note
    FROM upd u
    WHERE t.action_id = u.id AND t.kind = 'stale' AND t.state = 'open'
    RETURNING t.*
), tkev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT tk.action_id, 'ticket_resolved', u.tk_by, u.tk_channel, u.tk_at,
        (jsonb_build_object('ticket', tk.id::text) || coalesce(u.tk_data::jsonb, '{}'))::json
    FROM tk JOIN upd u ON u.id = tk.action_id JOIN ev ON ev.action_id = tk.action_id
    ORDER BY u.in_n
)
SELECT u.in_n::int - 1, {{actionColumns u}},
    {{ticketColumns}}
FROM upd u
LEFT JOIN LATERAL (
    SELECT * FROM (SELECT * FROM tickets t WHERE t.action_id = u.id AND t.id NOT IN (SELECT id FROM tk)
        UNION ALL SELECT * FROM tk WHERE tk.action_id = u.id) t
    ORDER BY t.state = 'open' DESC, t.opened_at DESC LIMIT 1
) t ON true;
