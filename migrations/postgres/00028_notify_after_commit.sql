-- +goose Up
-- The actions that move are announced by the process that moved them,
-- after the commit, many to one NOTIFY transaction (the announcer in
-- postgres/store.go), not by a trigger inside each moving transaction:
-- PostgreSQL holds the notification queue's lock from a notifying
-- transaction's pre-commit until its commit is flushed, so the trigger ran
-- every state change's commit one after another (docs/performance.md,
-- round 4). A process still on an older version announces nothing after
-- this: the others see its moves at their waiters' next re-read.
DROP TRIGGER actions_notify_update ON actions;
DROP FUNCTION actions_notify();

-- +goose Down
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
