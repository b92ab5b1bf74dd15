-- +goose Up
-- Single sign-on with OpenID Connect (CONTRACT section 15).
--
-- users: sso_subject is the provider's `sub` of the last single sign-on
-- (NULL: the user never signed in that way); idp_groups the provider's
-- groups as of then (or of the last recheck, idp_synced_at), which the
-- tools file's "idp:" group members are matched against; sso_denied_at
-- when a sign-in attempt found groups that map to no role (the user's
-- sessions end with it, and the next successful single sign-on clears it).
ALTER TABLE users
    ADD COLUMN sso_subject   text,
    ADD COLUMN idp_groups    jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN idp_synced_at timestamptz,
    ADD COLUMN sso_denied_at timestamptz,
    ADD CONSTRAINT users_idp_groups_array CHECK (jsonb_typeof(idp_groups) = 'array'),
    ADD CONSTRAINT users_idp_synced_with_subject CHECK (idp_synced_at IS NULL OR sso_subject IS NOT NULL);

-- The `state` of each finished sign-in, so that a state is used once: the
-- state itself lives in the browser's signed cookie until the provider
-- sends the browser back, and nothing is written for a visitor before then.
CREATE TABLE sso_states (
    state_hash text        PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX sso_states_expires ON sso_states (expires_at);

-- Staff events (a sign-in, a refused one) belong to no action.
ALTER TABLE events ALTER COLUMN action_id DROP NOT NULL;

-- +goose Down
DELETE FROM events WHERE action_id IS NULL;
ALTER TABLE events ALTER COLUMN action_id SET NOT NULL;
DROP TABLE sso_states;
ALTER TABLE users DROP CONSTRAINT users_idp_synced_with_subject,
    DROP CONSTRAINT users_idp_groups_array,
    DROP COLUMN sso_denied_at,
    DROP COLUMN idp_synced_at,
    DROP COLUMN idp_groups,
    DROP COLUMN sso_subject;
