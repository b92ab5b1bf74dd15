-- +goose Up
-- The SQLite twin of postgres/00018_reason_prompts.sql: the messages that
-- ask one user for a rejection's reason, recorded when they are sent, so
-- that only a reply to one of them, by the user asked, decides.
CREATE TABLE reason_prompts (
    kind      TEXT NOT NULL,
    address   TEXT NOT NULL,
    ref       TEXT NOT NULL,
    action_id TEXT NOT NULL REFERENCES actions (id),
    asked     TEXT NOT NULL,
    sent_at   TEXT NOT NULL,
    PRIMARY KEY (kind, address, ref),
    CONSTRAINT reason_prompts_kind_valid CHECK (kind IN ('telegram'))
) STRICT;

-- +goose Down
DROP TABLE reason_prompts;
