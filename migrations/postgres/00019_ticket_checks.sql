-- +goose Up
-- The verifiers' asking schedule (contract section 18): one row per ticket
-- a verifier has been asked about. checks counts the sweep's rounds,
-- next_at is when the next round is due (at once, then after 1, 2, 4 …
-- minutes, at most hourly), verdict the latest verdict: the sweep asks
-- again only while it is unknown. A round is claimed by the one statement
-- that moves next_at on, so several processes never ask twice for it.
CREATE TABLE ticket_checks (
    ticket_id uuid        PRIMARY KEY REFERENCES tickets (id),
    checks    integer     NOT NULL DEFAULT 0,
    next_at   timestamptz NOT NULL,
    verdict   text        NOT NULL DEFAULT 'unknown',
    CONSTRAINT ticket_checks_verdict_valid CHECK (verdict IN ('done', 'not_done', 'unknown'))
);
CREATE INDEX ticket_checks_due ON ticket_checks (next_at) WHERE verdict = 'unknown';

-- +goose Down
DROP TABLE ticket_checks;
