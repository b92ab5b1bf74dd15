-- +goose Up
-- The SQLite twin of postgres/00032_verify_slots.sql: the agents' slot to
-- ask an action's verifier, taken by one statement under the one writer.
CREATE TABLE verify_slots (
    action_id TEXT PRIMARY KEY NOT NULL REFERENCES actions (id),
    asked_at  TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE verify_slots;
