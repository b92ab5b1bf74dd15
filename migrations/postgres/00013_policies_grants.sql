-- +goose Up
-- Policies and grants (CONTRACT section 13).
--
-- An exactly-once action may now wait for a person (a policy rule's decide:
-- human) or be approved or rejected by a rule at its submission, so
-- actions_approval_states admits every class but at-least-once in the
-- approval states. Existing rows stay as they are.
ALTER TABLE actions DROP CONSTRAINT actions_approval_states,
    ADD CONSTRAINT actions_approval_states CHECK (class <> 'at-least-once'
        OR state NOT IN ('pending', 'approved', 'rejected', 'changes_requested')),
    -- The grant that approved the action at its submission (decided_by
    -- grant:ID until an agent's cancel says agent:NAME).
    ADD COLUMN grant_id uuid;

-- A grant: until expires_at, and for at most max_uses actions when set, a
-- submission of tool that no rule decided, by agent (any when NULL), whose
-- payload repeats fields ([{path, value}]; jsonb, so that a submission's
-- values compare with them as JSON values), is approved by it. uses counts
-- the actions a grant with a limit approved; the CHECK makes more than
-- max_uses unstorable, and the submission's conditional update under the
-- grant's row lock is what keeps it there.
CREATE TABLE grants (
    id          uuid PRIMARY KEY,
    tool        text        NOT NULL,
    agent       text,
    fields      jsonb       NOT NULL DEFAULT '[]',
    granted_by  text        NOT NULL,
    action_id   uuid        NOT NULL REFERENCES actions (id),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    max_uses    integer,
    uses        integer     NOT NULL DEFAULT 0,
    revoked_at  timestamptz,
    revoked_by  text,
    CONSTRAINT grants_fields_array CHECK (jsonb_typeof(fields) = 'array'),
    CONSTRAINT grants_max_uses_positive CHECK (max_uses IS NULL OR max_uses >= 1),
    CONSTRAINT grants_uses_within CHECK (uses >= 0 AND (max_uses IS NULL OR uses <= max_uses)),
    CONSTRAINT grants_expires_after_creation CHECK (expires_at > created_at),
    CONSTRAINT grants_revocation_complete CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);
-- The submission's lookup: the unrevoked grants of a tool, by expiry. A tool
-- without grants costs a submission one probe of this small index.
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
ALTER TABLE actions DROP COLUMN grant_id,
    DROP CONSTRAINT actions_approval_states,
    ADD CONSTRAINT actions_approval_states CHECK (class = 'at-most-once'
        OR state NOT IN ('pending', 'approved', 'rejected', 'changes_requested'));
