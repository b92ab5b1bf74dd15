-- +goose Up
-- The agents' slot to ask an action's verifier (contract section 18: at
-- most one check per action every 10 s, else 429 too_many_checks): a row
-- per action an agent asked about, asked_at when the slot was last taken.
-- The slot is taken by one conditional upsert before the verifier is
-- asked (queue.TicketChecks.VerifySlotTake), so several asks at once, in
-- one process or several, reach the verifier once; judging from the
-- latest verified event raced the ask, which takes up to its timeout.
CREATE TABLE verify_slots (
    action_id uuid        PRIMARY KEY REFERENCES actions (id),
    asked_at  timestamptz NOT NULL
);

-- +goose Down
DROP TABLE verify_slots;
