-- +goose Up
-- Grants end with their granter's right: the SQLite twin of
-- postgres/00017_grant_end.sql.
--
-- end_reason says why a revoked grant ended (queue.GrantEnd…). SQLite adds
-- a column with a CHECK of that column only; that it is set exactly when
-- revoked_at is is kept by the store's statements (the PostgreSQL schema
-- makes it a constraint).
ALTER TABLE grants ADD COLUMN end_reason TEXT
    CONSTRAINT grants_end_reason_valid CHECK (end_reason IS NULL OR end_reason IN ('revoked', 'granter_removed', 'granter_demoted', 'granter_refused'));
UPDATE grants SET end_reason = 'revoked' WHERE revoked_at IS NOT NULL;
-- A grant whose granter lost the right before this migration ends now.
UPDATE grants SET revoked_at = strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000000Z', revoked_by = 'system',
    end_reason = coalesce((SELECT CASE WHEN u.role NOT IN ('admin', 'approver') THEN 'granter_demoted' ELSE 'granter_refused' END
        FROM users u WHERE grants.granted_by LIKE 'user:%' AND lower(u.email) = lower(substr(grants.granted_by, 6))), 'granter_removed')
WHERE revoked_at IS NULL AND expires_at > strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000000Z'
  AND NOT EXISTS (SELECT 1 FROM users u WHERE grants.granted_by LIKE 'user:%' AND lower(u.email) = lower(substr(grants.granted_by, 6))
      AND u.role IN ('admin', 'approver') AND u.sso_denied_at IS NULL);
CREATE INDEX grants_active_granter ON grants (lower(granted_by)) WHERE revoked_at IS NULL;

-- +goose Down
DROP INDEX grants_active_granter;
ALTER TABLE grants DROP COLUMN end_reason;
