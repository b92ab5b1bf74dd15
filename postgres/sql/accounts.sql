-- Staff users, agent tokens, sessions, login failures and settings
-- (accounts.Store).

-- fragment: userColumns
id, email, password_hash, role, created_at, password_changed_at, coalesce(slack_id, ''), coalesce(telegram_id, 0),
    coalesce(sso_subject, ''), idp_groups, idp_synced_at, sso_denied_at

-- name: userCreateSQL
INSERT INTO users (email, password_hash, role, created_at, password_changed_at, slack_id, telegram_id)
VALUES ($1, $2, $3, $4, $4, $5, $6) RETURNING {{userColumns}};

-- name: userSetPasswordSQL
UPDATE users SET password_hash = $2, password_changed_at = $3 WHERE id = $1;

-- name: userUpdateSQL
UPDATE users SET password_hash = $2, password_changed_at = $3, role = $4,
    slack_id = coalesce($5, slack_id), telegram_id = coalesce($6, telegram_id), sso_denied_at = NULL WHERE id = $1;

-- name: userSSOSignInSQL
-- userSSOSignInSQL creates the user of a first single sign-on (with no
-- password) or refreshes the role and groups of the user with the email;
-- the last column says whether the row is new (xmax is 0 only for a row
-- this statement inserted).
INSERT INTO users (email, password_hash, role, created_at, password_changed_at, sso_subject, idp_groups, idp_synced_at)
VALUES ($1, '', $2, $3, $3, $4, $5, $3)
ON CONFLICT ((lower(email))) DO UPDATE SET role = EXCLUDED.role, sso_subject = EXCLUDED.sso_subject,
    idp_groups = EXCLUDED.idp_groups, idp_synced_at = EXCLUDED.idp_synced_at, sso_denied_at = NULL
RETURNING {{userColumns}}, xmax = 0;

-- name: userSSODenySQL
UPDATE users SET sso_subject = $2, idp_groups = $3, idp_synced_at = $4, sso_denied_at = $4
WHERE lower(email) = lower($1) RETURNING {{userColumns}};

-- name: ssoStateUseSQL
INSERT INTO sso_states (state_hash, expires_at) VALUES ($1, $2) ON CONFLICT (state_hash) DO NOTHING;

-- name: ssoStatePruneSQL
DELETE FROM sso_states WHERE expires_at <= $1;

-- name: userEndSessionsSQL
DELETE FROM sessions WHERE user_id = $1;

-- name: userSetRoleSQL
UPDATE users SET role = $2 WHERE id = $1;

-- name: userSetSlackIDSQL
UPDATE users SET slack_id = $2 WHERE id = $1;

-- name: userGetBySlackIDSQL
SELECT {{userColumns}} FROM users WHERE slack_id = $1;

-- name: userSetTelegramIDSQL
UPDATE users SET telegram_id = $2 WHERE id = $1;

-- name: userGetByTelegramIDSQL
SELECT {{userColumns}} FROM users WHERE telegram_id = $1;

-- name: userGetByEmailSQL
SELECT {{userColumns}} FROM users WHERE lower(email) = lower($1);

-- name: userGetByIDSQL
SELECT {{userColumns}} FROM users WHERE id = $1;

-- name: userListSQL
SELECT {{userColumns}} FROM users ORDER BY email;

-- name: userDeleteSQL
DELETE FROM users WHERE id = $1;

-- name: userCountSQL
SELECT count(*) FROM users;

-- name: tokenCreateSQL
INSERT INTO agent_tokens (name, token_hash, created_at) VALUES ($1, $2, $3)
RETURNING id, name, created_at, revoked_at;

-- name: tokenGetByHashSQL
SELECT id, name, created_at, revoked_at FROM agent_tokens WHERE token_hash = $1 AND revoked_at IS NULL;

-- name: tokenGetByHashManySQL
-- tokenGetByHashManySQL is tokenGetByHashSQL for the lookups of a batch,
-- with the index of the lookup in the batch first in each row.
SELECT i.n::int - 1, t.id, t.name, t.created_at, t.revoked_at
FROM unnest($1::text[]) WITH ORDINALITY AS i(hash, n)
JOIN agent_tokens t ON t.token_hash = i.hash AND t.revoked_at IS NULL;

-- name: tokenRevokeSQL
UPDATE agent_tokens SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL;

-- name: tokenListSQL
SELECT id, name, created_at, revoked_at FROM agent_tokens ORDER BY created_at DESC, id DESC;

-- name: sessionGetSQL
SELECT id, user_id, data, created_at, expires_at FROM sessions WHERE id = $1 AND expires_at > $2;

-- name: sessionSaveSQL
INSERT INTO sessions (id, user_id, data, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET user_id = EXCLUDED.user_id, data = EXCLUDED.data, expires_at = EXCLUDED.expires_at;

-- name: sessionSetDataSQL
UPDATE sessions SET data = $2 WHERE id = $1;

-- name: sessionDeleteSQL
DELETE FROM sessions WHERE id = $1;

-- name: loginFailureAddSQL
INSERT INTO login_failures (subject, at) VALUES ($1, $2);

-- name: loginFailureCountSQL
SELECT count(*) FROM login_failures WHERE subject = $1 AND at >= $2;

-- name: loginFailureRemoveSQL
DELETE FROM login_failures WHERE subject = $1 AND at = $2;

-- name: loginFailureClearSQL
DELETE FROM login_failures WHERE subject = $1;

-- name: sessionPruneSQL
DELETE FROM sessions WHERE expires_at <= $1;

-- name: loginFailurePruneSQL
DELETE FROM login_failures WHERE at < $1;

-- name: settingGetSQL
SELECT value FROM settings WHERE key = $1;

-- name: settingInitSQL
INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING;

-- name: settingTakeSQL
DELETE FROM settings WHERE key = $1 AND value = $2;
