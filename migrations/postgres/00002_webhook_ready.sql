-- +goose Up
-- The dispatcher lists approved webhook actions oldest first by
-- (created_at, id); key its partial index the same way so it serves that
-- scan (it was keyed by decided_at, which no query orders by).
DROP INDEX actions_webhook_ready;
CREATE INDEX actions_webhook_ready ON actions (created_at, id) WHERE state = 'approved' AND has_webhook;

-- +goose Down
DROP INDEX actions_webhook_ready;
CREATE INDEX actions_webhook_ready ON actions (decided_at) WHERE state = 'approved' AND has_webhook;
