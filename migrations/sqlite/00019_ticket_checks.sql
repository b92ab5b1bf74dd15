-- +goose Up
-- The SQLite twin of postgres/00019_ticket_checks.sql: the verifiers'
-- asking schedule, one row per ticket a verifier has been asked about.
CREATE TABLE ticket_checks (
    ticket_id TEXT    PRIMARY KEY NOT NULL REFERENCES tickets (id),
    checks    INTEGER NOT NULL DEFAULT 0,
    next_at   TEXT    NOT NULL,
    verdict   TEXT    NOT NULL DEFAULT 'unknown',
    CONSTRAINT ticket_checks_verdict_valid CHECK (verdict IN ('done', 'not_done', 'unknown'))
) STRICT;
CREATE INDEX ticket_checks_due ON ticket_checks (next_at) WHERE verdict = 'unknown';

-- +goose Down
DROP TABLE ticket_checks;
