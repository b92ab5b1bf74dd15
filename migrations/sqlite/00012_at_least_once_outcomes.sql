-- +goose Up
-- The SQLite twin of postgres/00012_at_least_once_outcomes.sql: an
-- at-least-once action may be recorded, done or failed (recorded stays that
-- class's alone), and actions_held_intent leaves the class out, so an
-- at-least-once done holds no intent. Existing rows stay as they are.
--
-- SQLite cannot alter a CHECK constraint, so actions is rebuilt as in
-- 00003_routing.sql (the ALTER TABLE page's twelve steps): create
-- actions_new, copy every column, drop actions, rename actions_new. The
-- store runs migrations with foreign keys off, so the drop leaves the
-- REFERENCES clauses of events, tickets, notifications and slack_messages
-- naming "actions", the new table, and checks them after (PRAGMA
-- foreign_key_check). The drop takes the table's indexes with it: every
-- one that 00001-00011 made is made again, unchanged but for
-- actions_held_intent's predicate. actions has no triggers.
CREATE TABLE actions_new (
    id               TEXT    PRIMARY KEY NOT NULL,
    tool             TEXT    NOT NULL,
    class            TEXT    NOT NULL,
    intent_key       TEXT    NOT NULL,
    attempt          INTEGER NOT NULL,
    state            TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    approved_payload TEXT,
    result           TEXT,
    error            TEXT,
    requested_by     TEXT    NOT NULL,
    channel          TEXT    NOT NULL DEFAULT 'api',
    decided_by       TEXT,
    decision_note    TEXT,
    created_at       TEXT    NOT NULL,
    decided_at       TEXT,
    claimed_at       TEXT,
    claimed_by       TEXT,
    claim_deadline   TEXT,
    finished_at      TEXT,
    expires_at       TEXT,
    has_webhook      INTEGER NOT NULL DEFAULT 0,
    spec             TEXT    NOT NULL,
    warnings         TEXT    NOT NULL DEFAULT '[]',
    -- The approvals given so far, written under the deciding transaction.
    approvals        TEXT    NOT NULL DEFAULT '[]',
    reminded_at      TEXT,
    escalated_at     TEXT,
    CONSTRAINT actions_class_valid CHECK (class IN ('exactly-once', 'at-least-once', 'at-most-once')),
    CONSTRAINT actions_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested',
                                                    'expired', 'cancelled', 'in_progress', 'done', 'failed', 'recorded')),
    CONSTRAINT actions_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT actions_recorded_only_at_least_once CHECK (state <> 'recorded' OR class = 'at-least-once'),
    CONSTRAINT actions_at_least_once_states CHECK (class <> 'at-least-once' OR state IN ('recorded', 'done', 'failed')),
    CONSTRAINT actions_key_required CHECK (class = 'at-least-once' OR length(intent_key) BETWEEN 1 AND 255),
    CONSTRAINT actions_claim_complete CHECK (state <> 'in_progress' OR (claimed_at IS NOT NULL AND claim_deadline IS NOT NULL)),
    CONSTRAINT actions_approval_states CHECK (class = 'at-most-once'
                                              OR state NOT IN ('pending', 'approved', 'rejected', 'changes_requested')),
    CONSTRAINT actions_payload_object CHECK (json_valid(payload) AND json_type(payload) = 'object'),
    CONSTRAINT actions_json_valid CHECK ((approved_payload IS NULL OR json_valid(approved_payload))
                                         AND (result IS NULL OR json_valid(result))
                                         AND json_valid(spec) AND json_valid(warnings) AND json_valid(approvals)),
    CONSTRAINT actions_has_webhook_bool CHECK (has_webhook IN (0, 1))
) STRICT;
INSERT INTO actions_new (id, tool, class, intent_key, attempt, state, payload, approved_payload, result, error,
    requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
    claim_deadline, finished_at, expires_at, has_webhook, spec, warnings, approvals, reminded_at, escalated_at)
SELECT id, tool, class, intent_key, attempt, state, payload, approved_payload, result, error,
    requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
    claim_deadline, finished_at, expires_at, has_webhook, spec, warnings, approvals, reminded_at, escalated_at FROM actions;
DROP TABLE actions;
ALTER TABLE actions_new RENAME TO actions;
CREATE UNIQUE INDEX actions_held_intent ON actions (intent_key)
    WHERE state IN ('pending', 'approved', 'rejected', 'in_progress', 'done') AND class <> 'at-least-once';
CREATE UNIQUE INDEX actions_intent_attempt ON actions (intent_key, attempt)
    WHERE class <> 'at-least-once';
CREATE INDEX actions_created ON actions (created_at, id);
CREATE INDEX actions_state_created ON actions (state, created_at, id);
CREATE INDEX actions_tool_created ON actions (tool, created_at, id);
CREATE INDEX actions_intent_prefix ON actions (intent_key);
CREATE INDEX actions_due ON actions (expires_at) WHERE state IN ('pending', 'approved');
CREATE INDEX actions_claim_due ON actions (claim_deadline) WHERE state = 'in_progress';
CREATE INDEX actions_webhook_ready ON actions (created_at, id) WHERE state = 'approved' AND has_webhook = 1;
CREATE INDEX actions_pending_tool ON actions (tool, created_at) WHERE state = 'pending';
CREATE INDEX actions_decided ON actions (decided_at, tool, created_at, decided_by)
    WHERE decided_at IS NOT NULL;
CREATE INDEX actions_remind_rule ON actions (created_at)
    WHERE state = 'pending' AND json_extract(spec, '$.approval.remind_after') > 0;
CREATE INDEX actions_escalate_rule ON actions (created_at)
    WHERE state = 'pending' AND json_extract(spec, '$.approval.escalate_after') > 0 AND escalated_at IS NULL;

-- +goose Down
-- The old CHECK admits an at-least-once action only as recorded, which is
-- how the code before this migration kept an upstream call's outcome (the
-- result, and the error when it failed): those that ended done or failed
-- go back to recorded, keeping both. Then the same rebuild, back.
UPDATE actions SET state = 'recorded' WHERE class = 'at-least-once' AND state IN ('done', 'failed');
CREATE TABLE actions_new (
    id               TEXT    PRIMARY KEY NOT NULL,
    tool             TEXT    NOT NULL,
    class            TEXT    NOT NULL,
    intent_key       TEXT    NOT NULL,
    attempt          INTEGER NOT NULL,
    state            TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    approved_payload TEXT,
    result           TEXT,
    error            TEXT,
    requested_by     TEXT    NOT NULL,
    channel          TEXT    NOT NULL DEFAULT 'api',
    decided_by       TEXT,
    decision_note    TEXT,
    created_at       TEXT    NOT NULL,
    decided_at       TEXT,
    claimed_at       TEXT,
    claimed_by       TEXT,
    claim_deadline   TEXT,
    finished_at      TEXT,
    expires_at       TEXT,
    has_webhook      INTEGER NOT NULL DEFAULT 0,
    spec             TEXT    NOT NULL,
    warnings         TEXT    NOT NULL DEFAULT '[]',
    -- The approvals given so far, written under the deciding transaction.
    approvals        TEXT    NOT NULL DEFAULT '[]',
    reminded_at      TEXT,
    escalated_at     TEXT,
    CONSTRAINT actions_class_valid CHECK (class IN ('exactly-once', 'at-least-once', 'at-most-once')),
    CONSTRAINT actions_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested',
                                                    'expired', 'cancelled', 'in_progress', 'done', 'failed', 'recorded')),
    CONSTRAINT actions_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT actions_recorded_iff_at_least_once CHECK ((class = 'at-least-once') = (state = 'recorded')),
    CONSTRAINT actions_key_required CHECK (class = 'at-least-once' OR length(intent_key) BETWEEN 1 AND 255),
    CONSTRAINT actions_claim_complete CHECK (state <> 'in_progress' OR (claimed_at IS NOT NULL AND claim_deadline IS NOT NULL)),
    CONSTRAINT actions_approval_states CHECK (class = 'at-most-once'
                                              OR state NOT IN ('pending', 'approved', 'rejected', 'changes_requested')),
    CONSTRAINT actions_payload_object CHECK (json_valid(payload) AND json_type(payload) = 'object'),
    CONSTRAINT actions_json_valid CHECK ((approved_payload IS NULL OR json_valid(approved_payload))
                                         AND (result IS NULL OR json_valid(result))
                                         AND json_valid(spec) AND json_valid(warnings) AND json_valid(approvals)),
    CONSTRAINT actions_has_webhook_bool CHECK (has_webhook IN (0, 1))
) STRICT;
INSERT INTO actions_new (id, tool, class, intent_key, attempt, state, payload, approved_payload, result, error,
    requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
    claim_deadline, finished_at, expires_at, has_webhook, spec, warnings, approvals, reminded_at, escalated_at)
SELECT id, tool, class, intent_key, attempt, state, payload, approved_payload, result, error,
    requested_by, channel, decided_by, decision_note, created_at, decided_at, claimed_at, claimed_by,
    claim_deadline, finished_at, expires_at, has_webhook, spec, warnings, approvals, reminded_at, escalated_at FROM actions;
DROP TABLE actions;
ALTER TABLE actions_new RENAME TO actions;
CREATE UNIQUE INDEX actions_held_intent ON actions (intent_key)
    WHERE state IN ('pending', 'approved', 'rejected', 'in_progress', 'done');
CREATE UNIQUE INDEX actions_intent_attempt ON actions (intent_key, attempt)
    WHERE class <> 'at-least-once';
CREATE INDEX actions_created ON actions (created_at, id);
CREATE INDEX actions_state_created ON actions (state, created_at, id);
CREATE INDEX actions_tool_created ON actions (tool, created_at, id);
CREATE INDEX actions_intent_prefix ON actions (intent_key);
CREATE INDEX actions_due ON actions (expires_at) WHERE state IN ('pending', 'approved');
CREATE INDEX actions_claim_due ON actions (claim_deadline) WHERE state = 'in_progress';
CREATE INDEX actions_webhook_ready ON actions (created_at, id) WHERE state = 'approved' AND has_webhook = 1;
CREATE INDEX actions_pending_tool ON actions (tool, created_at) WHERE state = 'pending';
CREATE INDEX actions_decided ON actions (decided_at, tool, created_at, decided_by)
    WHERE decided_at IS NOT NULL;
CREATE INDEX actions_remind_rule ON actions (created_at)
    WHERE state = 'pending' AND json_extract(spec, '$.approval.remind_after') > 0;
CREATE INDEX actions_escalate_rule ON actions (created_at)
    WHERE state = 'pending' AND json_extract(spec, '$.approval.escalate_after') > 0 AND escalated_at IS NULL;
