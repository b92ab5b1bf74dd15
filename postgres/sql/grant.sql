-- Grants (queue.Grant): created with an approval (decide.go), used by
-- submissions (submit.sql), listed, found for a dry run, revoked.

-- fragment: grantColumns
-- grantColumns is the select list of the grant g in scanGrant's order,
-- uses counted: the counter of a grant with a limit, else the actions it
-- approved (actions_grant).
g.id::text, g.tool, coalesce(g.agent, ''), g.fields::text, g.granted_by, g.action_id::text,
    g.created_at, g.expires_at, coalesce(g.max_uses, 0),
    CASE WHEN g.max_uses IS NULL THEN (SELECT count(*) FROM actions a WHERE a.grant_id = g.id)::int ELSE g.uses END,
    g.revoked_at, g.revoked_by, coalesce(g.end_reason, '')

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

-- name: grantCandidatesSQL
-- grantCandidatesSQL reads the grants of the tool $2 active at $1 with
-- what queue.GranterStanding needs of each granting user (a
-- queue.GrantCandidate each): the store reads, queue.PickGrant judges.
-- Read in the snapshot, without a lock (grantLockSQL or grantShareSQL
-- locks the one picked). One probe of grants_active_tool, and of
-- users_email per grant.
SELECT {{grantColumns}},
    u.id IS NOT NULL, coalesce(u.role, ''), coalesce(u.idp_groups, '[]')::text, u.sso_denied_at IS NOT NULL
FROM grants g
LEFT JOIN users u ON g.granted_by LIKE 'user:%' AND lower(u.email) = lower(substr(g.granted_by, 6))
WHERE g.tool = $2 AND {{grantActive}};

-- name: grantLockSQL
-- grantLockSQL locks the grant $1 a submission is about to use up to its
-- limit and reads it again: FOR UPDATE waits for a concurrent use to
-- commit and then reads the grant as it committed, so its uses are
-- current. Twenty concurrent submissions against a grant of three uses
-- queue on its row lock, and three are approved.
SELECT {{grantColumns}} FROM grants g WHERE g.id = $1 FOR UPDATE OF g;

-- name: grantShareSQL
-- grantShareSQL is grantLockSQL for a grant without a limit: FOR SHARE
-- lets every submission use it at once, while a revocation (or the end of
-- its granting user's grants) waits for them to commit, or they for it,
-- and then read it revoked.
SELECT {{grantColumns}} FROM grants g WHERE g.id = $1 FOR SHARE OF g;

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
-- unexpired grants of the user $1 and records the domain's event
-- (queue.GrantEndOfUser: $4 kind, $5 actor, who is also revoked_by, $6
-- channel, $7 data, at $2) on each grant's action, the grant's id added to
-- its data: run in the transaction that removes the user (before the row
-- goes), lowers their role or records the identity provider's refusal, so
-- no submission after it commits is approved in their name.
WITH upd AS (
    UPDATE grants g SET revoked_at = $2, revoked_by = $5::text, end_reason = $3
    FROM users u
    WHERE u.id = $1 AND lower(g.granted_by) = lower('user:' || u.email) AND g.revoked_at IS NULL AND g.expires_at > $2
    RETURNING g.id, g.action_id
)
INSERT INTO events (action_id, kind, actor, channel, at, data)
SELECT action_id, $4::text, $5::text, $6::text, $2, (jsonb_build_object('grant', id::text) || coalesce($7::jsonb, '{}'))::json
FROM upd;

-- name: policyHitsSQL
-- policyHitsSQL counts the policy events since $2 (the week) by tool and
-- rule, and those since $1 (the day), reading events_policy.
SELECT a.tool, substr(e.actor, $3), count(*) FILTER (WHERE e.at >= $1), count(*)
FROM events e JOIN actions a ON a.id = e.action_id
WHERE e.channel = 'policy' AND e.at >= $2
GROUP BY 1, 2 ORDER BY 1, 2;
