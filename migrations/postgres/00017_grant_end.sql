-- +goose Up
-- Grants end with their granter's right (CONTRACT "Hardening, round 3").
--
-- end_reason says why a revoked grant ended (queue.GrantEnd…): a person
-- revoked it, or its granting user was removed, lost the approver role or
-- was refused by the identity provider, in the transaction that did so
-- (revoked_by 'system'). Grants revoked before this migration were revoked
-- by a person.
ALTER TABLE grants ADD COLUMN end_reason text;
UPDATE grants SET end_reason = 'revoked' WHERE revoked_at IS NOT NULL;
-- A grant whose granter lost the right before this migration ends now,
-- as it would have then.
UPDATE grants g SET revoked_at = now(), revoked_by = 'system',
    end_reason = CASE WHEN u.id IS NULL THEN 'granter_removed'
        WHEN u.role NOT IN ('admin', 'approver') THEN 'granter_demoted'
        ELSE 'granter_refused' END
FROM grants g2 LEFT JOIN users u ON g2.granted_by LIKE 'user:%' AND lower(u.email) = lower(substr(g2.granted_by, 6))
WHERE g.id = g2.id AND g.revoked_at IS NULL AND g.expires_at > now()
  AND (u.id IS NULL OR u.role NOT IN ('admin', 'approver') OR u.sso_denied_at IS NOT NULL);
ALTER TABLE grants
    ADD CONSTRAINT grants_end_reason_valid CHECK (end_reason IN ('revoked', 'granter_removed', 'granter_demoted', 'granter_refused')),
    ADD CONSTRAINT grants_end_reason_with_revocation CHECK ((end_reason IS NULL) = (revoked_at IS NULL));
-- The grants a change of one user ends: their unrevoked ones.
CREATE INDEX grants_active_granter ON grants (lower(granted_by)) WHERE revoked_at IS NULL;

-- +goose Down
DROP INDEX grants_active_granter;
ALTER TABLE grants DROP CONSTRAINT grants_end_reason_with_revocation,
    DROP CONSTRAINT grants_end_reason_valid,
    DROP COLUMN end_reason;
