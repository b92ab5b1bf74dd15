-- +goose Up
-- Policies and grants (CONTRACT section 13), the SQLite twin of
-- postgres/00013_policies_grants.sql.
--
-- An exactly-once action may now wait for a person (a policy rule's decide:
-- human) or be approved or rejected by a rule, so actions_approval_states
-- admits every class but at-least-once in the approval states; actions
-- gains grant_id, the grant that approved it at its submission. SQLite
-- cannot alter a CHECK constraint, so actions is rebuilt as in
-- 00012_at_least_once_outcomes.sql (create actions_new, copy every column,
-- drop actions, rename actions_new; foreign keys are off while migrating,
-- so the REFERENCES of the other tables name the new table), and every
-- index made before is made again, unchanged. Existing rows stay as they
-- are.
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
    -- The grant that approved the action at its submission (decided_by
    -- grant:ID until an agent's cancel says agent:NAME).
    grant_id         TEXT,
    CONSTRAINT actions_class_valid CHECK (class IN ('exactly-once', 'at-least-once', 'at-most-once')),
    CONSTRAINT actions_state_valid CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested',
                                                    'expired', 'cancelled', 'in_progress', 'done', 'failed', 'recorded')),
    CONSTRAINT actions_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT actions_recorded_only_at_least_once CHECK (state <> 'recorded' OR class = 'at-least-once'),
    CONSTRAINT actions_at_least_once_states CHECK (class <> 'at-least-once' OR state IN ('recorded', 'done', 'failed')),
    CONSTRAINT actions_key_required CHECK (class = 'at-least-once' OR length(intent_key) BETWEEN 1 AND 255),
    CONSTRAINT actions_claim_complete CHECK (state <> 'in_progress' OR (claimed_at IS NOT NULL AND claim_deadline IS NOT NULL)),
    CONSTRAINT actions_approval_states CHECK (class <> 'at-least-once'
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

-- A grant: until expires_at, and for at most max_uses actions when set, a
-- submission of tool that no rule decided, by agent (any when NULL), whose
-- payload repeats fields ([{path, value}]), is approved by it. uses counts
-- the actions a grant with a limit approved; the CHECK makes more than
-- max_uses unstorable, and the submission's conditional update is what
-- keeps it there.
CREATE TABLE grants (
    id          TEXT    PRIMARY KEY NOT NULL,
    tool        TEXT    NOT NULL,
    agent       TEXT,
    fields      TEXT    NOT NULL DEFAULT '[]',
    granted_by  TEXT    NOT NULL,
    action_id   TEXT    NOT NULL REFERENCES actions (id),
    created_at  TEXT    NOT NULL,
    expires_at  TEXT    NOT NULL,
    max_uses    INTEGER,
    uses        INTEGER NOT NULL DEFAULT 0,
    revoked_at  TEXT,
    revoked_by  TEXT,
    CONSTRAINT grants_fields_json CHECK (json_valid(fields) AND json_type(fields) = 'array'),
    CONSTRAINT grants_max_uses_positive CHECK (max_uses IS NULL OR max_uses >= 1),
    CONSTRAINT grants_uses_within CHECK (uses >= 0 AND (max_uses IS NULL OR uses <= max_uses)),
    CONSTRAINT grants_expires_after_creation CHECK (expires_at > created_at),
    CONSTRAINT grants_revocation_complete CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
) STRICT;
-- The submission's lookup: the unrevoked grants of a tool, by expiry.
CREATE INDEX grants_active_tool ON grants (tool, expires_at) WHERE revoked_at IS NULL;
CREATE INDEX grants_created ON grants (created_at, id);
-- The actions each grant approved (/grants).
CREATE INDEX actions_grant ON actions (grant_id, created_at) WHERE grant_id IS NOT NULL;
-- Each rule's decisions over the last day and week (/tools).
CREATE INDEX events_policy ON events (at, actor) WHERE channel = 'policy';

-- +goose Down
-- The old CHECK cannot hold an exactly-once action a person decides: each
-- such action ends as it stands, nothing having been done (pending or
-- approved: cancelled by system; rejected or changes requested: failed with
-- the decision's note), which releases its intent as the old code expects.
DROP INDEX events_policy;
DROP INDEX actions_grant;
DROP TABLE grants;
UPDATE actions SET state = 'cancelled', decided_by = coalesce(decided_by, 'system'), finished_at = coalesce(finished_at, created_at)
    WHERE class = 'exactly-once' AND state IN ('pending', 'approved');
UPDATE actions SET state = 'failed', error = coalesce(decision_note, 'rejected'), finished_at = coalesce(finished_at, created_at)
    WHERE class = 'exactly-once' AND state IN ('rejected', 'changes_requested');
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

