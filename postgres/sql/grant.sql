-- Grants (queue.Grant): created with an approval (decide.go), used by
-- submissions (submit.sql), listed, found for a dry run, revoked.

-- fragment: grantMatches
-- grantMatches is queue.Grant.Matches of the grant g for the submission
-- {{.}} (with columns requested_by and payload, the payload's text) but
-- for the tool: its agent, if it names one, and every field's value equal
-- as JSON. jsonb compares numbers by value and objects without regard to
-- key order, as queue.JSONEqual does; a missing field is NULL, which
-- matches nothing. Grant fields never step into arrays (queue refuses a
-- path with a numeric segment), so #> reads objects only, as Matches does.
(g.agent IS NULL OR g.agent = {{.}}.requested_by) AND NOT EXISTS (
    SELECT 1 FROM jsonb_array_elements(g.fields) f
    WHERE ({{.}}.payload::jsonb #> string_to_array(f->>'path', '.')) IS DISTINCT FROM f->'value')

-- fragment: grantColumns
-- grantColumns is the select list of the grant g in scanGrant's order,
-- uses counted: the counter of a grant with a limit, else the actions it
-- approved (actions_grant).
g.id::text, g.tool, coalesce(g.agent, ''), g.fields::text, g.granted_by, g.action_id::text,
    g.created_at, g.expires_at, coalesce(g.max_uses, 0),
    CASE WHEN g.max_uses IS NULL THEN (SELECT count(*) FROM actions a WHERE a.grant_id = g.id)::int ELSE g.uses END,
    g.revoked_at, g.revoked_by, coalesce(g.end_reason, '')

-- fragment: granterMayDecide
-- granterMayDecide is queue.GranterStanding(approval, granter) = "" for the
-- grant g, with {{.}} the tool's approval rule as jsonb (the new action's
-- spec->'approval'; NULL: none): its granting user exists, their role
-- decides (accounts.Role.CanDecide: admin, approver), the identity
-- provider has not refused them, and classify.Approval.MayDecide admits
-- them (no approvers named, their email among approver_emails, or one of
-- their idp_groups among approver_idp_groups). One probe of users_email.
EXISTS (SELECT 1 FROM users u CROSS JOIN (SELECT {{.}} AS ap) r
    WHERE g.granted_by LIKE 'user:%' AND lower(u.email) = lower(substr(g.granted_by, 6))
      AND u.role IN ('admin', 'approver') AND u.sso_denied_at IS NULL
      AND (jsonb_array_length(coalesce(r.ap->'approvers', '[]')) = 0
        OR coalesce(r.ap->'approver_emails', '[]') ? lower(u.email)
        OR u.idp_groups ?| ARRAY(SELECT jsonb_array_elements_text(coalesce(r.ap->'approver_idp_groups', '[]')))))

-- fragment: grantActive
-- grantActive is queue.Grant.Active of the grant g at $1.
(g.revoked_at IS NULL AND g.expires_at > $1 AND (g.max_uses IS NULL OR g.uses < g.max_uses))

-- name: grantGetByIDSQL
SELECT {{grantColumns}} FROM grants g WHERE g.id = $1;

-- name: grantListSQL
-- grantListSQL lists grants newest first: the active ones at $1 ($2
-- true), the others ($2 false), or all ($2 NULL).
SELECT {{grantColumns}} FROM grants g
WHERE $2::boolean IS NULL OR {{grantActive}} = $2
ORDER BY g.created_at DESC, g.id DESC LIMIT $3;

-- name: grantFindSQL
-- grantFindSQL is the grant a submission ($2 tool, $3 requested_by, $4
-- payload, $5 the tool's approval rule) at $1 would use, as submitSQL
-- picks it (one without a limit first, then the one that expires
-- soonest), read without a lock.
WITH sub AS (
    SELECT $3::text AS requested_by, $4::text AS payload
)
SELECT {{grantColumns}} FROM grants g, sub
WHERE g.tool = $2 AND {{grantActive}} AND {{grantMatches sub}} AND {{granterMayDecide $5::jsonb}}
ORDER BY g.max_uses IS NOT NULL, g.expires_at, g.id LIMIT 1;

-- name: grantRevokeSQL
-- grantRevokeSQL revokes an unrevoked grant and records the event on its
-- action, in one statement; no row: revoked already, or unknown.
WITH upd AS (
    UPDATE grants SET revoked_at = $2, revoked_by = $3, end_reason = 'revoked' WHERE id = $1 AND revoked_at IS NULL
    RETURNING action_id
), ev AS (
    INSERT INTO events (action_id, kind, actor, channel, at, data)
    SELECT action_id, $4, $3, $5, $2, $6::json FROM upd
)
SELECT count(*) FROM upd;

-- name: grantEndOfUserSQL
-- grantEndOfUserSQL ends, at $2 for the reason $3 (queue.GrantEnd…), the
-- unexpired grants of the user $1 and records grant_revoked by system on
-- each grant's action (queue.GrantSystemActor): run in the transaction that removes the user (before
-- the row goes), lowers their role or records the identity provider's
-- refusal, so no submission after it commits is approved in their name.
WITH upd AS (
    UPDATE grants g SET revoked_at = $2, revoked_by = 'system', end_reason = $3
    FROM users u
    WHERE u.id = $1 AND lower(g.granted_by) = lower('user:' || u.email) AND g.revoked_at IS NULL AND g.expires_at > $2
    RETURNING g.id, g.action_id
)
INSERT INTO events (action_id, kind, actor, channel, at, data)
SELECT action_id, 'grant_revoked', 'system', 'system', $2, json_build_object('grant', id::text, 'reason', $3::text)
FROM upd;

-- name: policyHitsSQL
-- policyHitsSQL counts the policy events since $2 (the week) by tool and
-- rule, and those since $1 (the day), reading events_policy.
SELECT a.tool, substr(e.actor, $3), count(*) FILTER (WHERE e.at >= $1), count(*)
FROM events e JOIN actions a ON a.id = e.action_id
WHERE e.channel = 'policy' AND e.at >= $2
GROUP BY 1, 2 ORDER BY 1, 2;
