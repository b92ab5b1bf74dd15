-- The column lists every statement that answers an action, a ticket or a
-- notification shares: the order of scanAction, scanTicket and
-- scanNotification.

-- fragment: actionColumns
-- actionColumns is the select list of the action columns of the row
-- aliased {{.}}, in scanAction's order; ticketColumns (of the ticket t)
-- follow them in every statement that answers an action.
{{.}}.id::text, {{.}}.tool, {{.}}.class, {{.}}.intent_key, {{.}}.attempt, {{.}}.state, {{.}}.payload,
    {{.}}.approved_payload, {{.}}.result, {{.}}.error, {{.}}.requested_by, {{.}}.channel, {{.}}.decided_by,
    {{.}}.decision_note, {{.}}.created_at, {{.}}.decided_at, {{.}}.claimed_at, {{.}}.claimed_by,
    {{.}}.finished_at, {{.}}.expires_at, {{.}}.spec, {{.}}.warnings, {{.}}.approvals, {{.}}.escalated_at,
    {{.}}.grant_id::text

-- fragment: ticketColumns
t.id::text, t.kind, t.state, t.opened_at, t.resolved_at, t.resolved_by, t.outcome, t.note

-- fragment: noTicket
-- noTicket stands for ticketColumns where the action has no ticket.
NULL::text, NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::text

-- fragment: currentTicket
-- currentTicket joins the current ticket of the action {{.}}: the open one
-- if any, else the most recent.
LEFT JOIN LATERAL (
    SELECT * FROM tickets t WHERE t.action_id = {{.}}.id
    ORDER BY t.state = 'open' DESC, t.opened_at DESC LIMIT 1
) t ON true

-- fragment: ticketRow
t.id::text, t.action_id::text, t.kind, t.state, t.opened_at, t.resolved_at, t.resolved_by, t.outcome, t.note

-- fragment: notificationColumns
n.id::text, n.event_id, coalesce(n.action_id::text, ''), coalesce(n.plan_id::text, ''), n.type, n.channel, n.kind, n.state, n.attempts,
    n.created_at, n.due_at, n.delivered_at, coalesce(n.last_error, ''), e.at, e.data

-- fragment: held
-- held is how a statement names the holder of an intent key: the
-- predicate of the partial unique index actions_held_intent, term for
-- term. Literals, not a parameter: the planner matches them against the
-- index's predicate, which a parameter under the batches' generic plans
-- (see Open) could not be. For the same reason it says a.class <>
-- 'at-least-once' as the index does (an at-least-once action holds
-- nothing, whatever its state), even where the input's class already
-- rules the class out: the planner uses a partial index only for a
-- condition that implies its whole predicate
-- (TestHolderLookupsUseHeldIntentIndex).
a.state IN ({{heldStates}}) AND a.class <> 'at-least-once'
