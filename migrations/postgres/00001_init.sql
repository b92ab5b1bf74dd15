-- +goose Up
-- JSON columns are json, not jsonb: payloads come back exactly as submitted
-- (key order, number spelling), and nothing queries inside them; the
-- service compares them as JSON values in Go.
-- Named CHECK constraints make illegal states unstorable; the partial unique
-- index actions_held_intent is the intent guard itself.
CREATE TABLE actions (
    id               uuid PRIMARY KEY,
    tool             text        NOT NULL,
    class            text        NOT NULL,
    intent_key       text        NOT NULL,
    attempt          integer     NOT NULL,
    state            text        NOT NULL,
    payload          json        NOT NULL,
    approved_payload json,
    result           json,
    error            text,
    requested_by     text        NOT NULL,
    channel          text        NOT NULL DEFAULT 'api',
    decided_by       text,
    decision_note    text,
    created_at       timestamptz NOT NULL,
    decided_at       timestamptz,
    claimed_at       timestamptz,
    claimed_by       text,
    claim_deadline   timestamptz,
    finished_at      timestamptz,
    expires_at       timestamptz,
    has_webhook      boolean     NOT NULL DEFAULT false,
    spec             json        NOT NULL,
    warnings         json        NOT NULL DEFAULT '[]',
    CONSTRAINT actions_class_valid CHECK (class IN ('exactly-once', 'at-least-once', 'at-most-once')),
    CONSTRAINT actions_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'expired', 'cancelled',
                                                    'in_progress', 'done', 'failed', 'recorded')),
    CONSTRAINT actions_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT actions_recorded_iff_at_least_once CHECK ((class = 'at-least-once') = (state = 'recorded')),
    CONSTRAINT actions_key_required CHECK (class = 'at-least-once' OR length(intent_key) BETWEEN 1 AND 255),
    CONSTRAINT actions_claim_complete CHECK (state <> 'in_progress' OR (claimed_at IS NOT NULL AND claim_deadline IS NOT NULL)),
    CONSTRAINT actions_approval_states CHECK (class = 'at-most-once' OR state NOT IN ('pending', 'approved', 'rejected')),
    CONSTRAINT actions_payload_object CHECK (json_typeof(payload) = 'object')
);

CREATE UNIQUE INDEX actions_held_intent ON actions (intent_key)
    WHERE state IN ('pending', 'approved', 'rejected', 'in_progress', 'done');
CREATE UNIQUE INDEX actions_intent_attempt ON actions (intent_key, attempt)
    WHERE class <> 'at-least-once';
CREATE INDEX actions_created ON actions (created_at, id);
CREATE INDEX actions_state_created ON actions (state, created_at, id);
CREATE INDEX actions_tool_created ON actions (tool, created_at, id);
CREATE INDEX actions_intent_prefix ON actions (intent_key text_pattern_ops);
CREATE INDEX actions_due ON actions (expires_at) WHERE state IN ('pending', 'approved');
CREATE INDEX actions_claim_due ON actions (claim_deadline) WHERE state = 'in_progress';
CREATE INDEX actions_webhook_ready ON actions (decided_at) WHERE state = 'approved' AND has_webhook;

CREATE TABLE events (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action_id uuid        NOT NULL REFERENCES actions (id),
    kind      text        NOT NULL,
    actor     text        NOT NULL,
    channel   text        NOT NULL DEFAULT '',
    at        timestamptz NOT NULL,
    data      json
);
CREATE INDEX events_action ON events (action_id, id);
CREATE INDEX events_kind ON events (kind, id);

CREATE TABLE tickets (
    id          uuid PRIMARY KEY,
    action_id   uuid        NOT NULL REFERENCES actions (id),
    kind        text        NOT NULL,
    state       text        NOT NULL DEFAULT 'open',
    opened_at   timestamptz NOT NULL,
    resolved_at timestamptz,
    resolved_by text,
    outcome     text,
    note        text,
    CONSTRAINT tickets_kind_valid CHECK (kind IN ('stale', 'conflict')),
    CONSTRAINT tickets_state_valid CHECK (state IN ('open', 'resolved')),
    CONSTRAINT tickets_resolution_complete CHECK ((state = 'open') = (resolved_at IS NULL)),
    CONSTRAINT tickets_outcome_valid CHECK (outcome IS NULL OR outcome IN ('done', 'failed'))
);
-- One open ticket of a kind per action, however many processes sweep.
CREATE UNIQUE INDEX tickets_one_open ON tickets (action_id, kind) WHERE state = 'open';
CREATE INDEX tickets_open_opened ON tickets (opened_at) WHERE state = 'open';
CREATE INDEX tickets_action ON tickets (action_id, opened_at);

CREATE TABLE users (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email               text        NOT NULL,
    password_hash       text        NOT NULL,
    role                text        NOT NULL,
    created_at          timestamptz NOT NULL,
    password_changed_at timestamptz NOT NULL,
    CONSTRAINT users_role_valid CHECK (role IN ('admin', 'approver', 'ops', 'viewer'))
);
CREATE UNIQUE INDEX users_email ON users (lower(email));

CREATE TABLE agent_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL,
    token_hash   text        NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);
-- A name is reusable once its token is revoked.
CREATE UNIQUE INDEX agent_tokens_active_name ON agent_tokens (name) WHERE revoked_at IS NULL;

CREATE TABLE sessions (
    id         text PRIMARY KEY,
    user_id    bigint      REFERENCES users (id) ON DELETE CASCADE,
    data       text        NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_expires ON sessions (expires_at);

CREATE TABLE login_failures (
    subject text        NOT NULL,
    at      timestamptz NOT NULL
);
CREATE INDEX login_failures_subject ON login_failures (subject, at);

CREATE TABLE settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- Every state change is announced on a channel named after the schema, so
-- long-polls and live dashboards in any process wake at once. Inserts stay
-- off NOTIFY: a notifying transaction serialises commits, and nobody waits
-- on a new row (the dashboard finds new pending rows by a cheap poll).
-- +goose StatementBegin
CREATE FUNCTION actions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('approvals_changes_' || current_schema(), NEW.id::text || ':' || NEW.state);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER actions_notify_update AFTER UPDATE OF state ON actions
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION actions_notify();

-- +goose Down
DROP FUNCTION actions_notify CASCADE;
DROP TABLE settings, login_failures, sessions, agent_tokens, users, tickets, events, actions;
