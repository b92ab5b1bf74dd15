-- +goose Up
-- The tamper-evident audit log (docs/audit.md).

-- Staff events (sign-ins, token and user changes) belong to no action:
-- they name what they are about in subject instead (when more than the
-- actor is known). NOT VALID: no existing row has a subject, and checking
-- that would read the whole table under this statement's exclusive lock;
-- new rows are checked. 00014 (single sign-on) made action_id nullable.
ALTER TABLE events ADD COLUMN subject text,
    ADD CONSTRAINT events_subject_staff_only CHECK (action_id IS NULL OR subject IS NULL) NOT VALID;

-- txid is the transaction that wrote the event: the sealer orders events
-- by (txid, id) and seals an event only once every transaction with a
-- smaller id has ended (docs/audit.md says why that never leaves a gap).
-- The row's own xmin will not do: the outbox's fan-out rewrites the row.
-- Existing rows get 0 from a constant default, which rewrites nothing, so
-- they are sealed first, in id order; new rows get their writer's id.
ALTER TABLE events ADD COLUMN txid xid8 NOT NULL DEFAULT '0';
ALTER TABLE events ALTER COLUMN txid SET DEFAULT pg_current_xact_id();
-- The sealer's scan past its cursor, and the count of unsealed events.
CREATE INDEX events_seal_order ON events (txid, id);

-- One row per sealed event. Its own table, not columns of events: sealing
-- inserts one narrow row instead of rewriting each event row with all its
-- indexes. No foreign key: a deleted event must leave its link behind, to
-- be seen as removed.
CREATE TABLE audit_chain (
    seq       bigint PRIMARY KEY,
    event_id  bigint NOT NULL,
    prev_hash bytea  NOT NULL,
    hash      bytea  NOT NULL,
    CONSTRAINT audit_chain_seq_positive CHECK (seq >= 1),
    CONSTRAINT audit_chain_hash_size CHECK (length(prev_hash) = 32 AND length(hash) = 32)
);
-- An event is sealed once.
CREATE UNIQUE INDEX audit_chain_event ON audit_chain (event_id);

-- The chain's head (its last link and the sealer's cursor), the sealer's
-- lease and the last verification: one row, which every append updates
-- conditionally, so two sealers can never both extend one head.
CREATE TABLE audit_head (
    id              integer PRIMARY KEY,
    seq             bigint  NOT NULL,
    hash            bytea   NOT NULL,
    cursor_txid     xid8    NOT NULL,
    cursor_id       bigint  NOT NULL,
    sealed_at       timestamptz,
    holder          text,
    lease_until     timestamptz,
    verified_at     timestamptz,
    verified_seq    bigint,
    verified_ok     boolean,
    verified_detail text,
    CONSTRAINT audit_head_one_row CHECK (id = 1),
    CONSTRAINT audit_head_hash_size CHECK (length(hash) = 32)
);
INSERT INTO audit_head (id, seq, hash, cursor_txid, cursor_id) VALUES (1, 0, decode(repeat('00', 32), 'hex'), '0', 0);

-- +goose Down
DROP TABLE audit_head, audit_chain;
DROP INDEX events_seal_order;
ALTER TABLE events DROP CONSTRAINT events_subject_staff_only, DROP COLUMN txid, DROP COLUMN subject;
