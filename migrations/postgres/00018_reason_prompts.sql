-- +goose Up
-- The messages that ask one user for a rejection's reason (Telegram's
-- force-reply question after Reject), recorded when they are sent: a reply
-- decides only when it answers one of these, by the user asked, so nothing
-- written in a message (an agent writes the approval messages' text) can
-- aim a reply at another action. address is the chat, ref the message_id
-- (unique within its chat), asked the Telegram user id of who was asked.
CREATE TABLE reason_prompts (
    kind      text        NOT NULL,
    address   text        NOT NULL,
    ref       text        NOT NULL,
    action_id uuid        NOT NULL REFERENCES actions (id),
    asked     text        NOT NULL,
    sent_at   timestamptz NOT NULL,
    PRIMARY KEY (kind, address, ref),
    CONSTRAINT reason_prompts_kind_valid CHECK (kind IN ('telegram'))
);

-- +goose Down
DROP TABLE reason_prompts;
