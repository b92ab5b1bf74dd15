-- +goose Up
-- One row per sealing round instead of one per sealed event (issue 45):
-- a round appends its events' links as one row, the seq of its first
-- event, the events' ids in seal order, the hash before the first and the
-- events' hashes end to end (32 bytes each). Sealing a round of n events
-- then writes one row and one index entry, not n rows and 2n entries.
-- Link k of a round (k = 1, 2, …) is seq + k - 1, its event event_ids[k],
-- its hash bytes 32(k-1)+1 … 32k of hashes, its prev_hash the hash before
-- it (the round's prev_hash for the first). The view audit_chain gives the
-- links one a row, as the table of that name did before.
--
-- No foreign key, as before: a deleted event leaves its id behind, to be
-- seen as removed. The old table's unique index on event_id goes: an event
-- is sealed once because the head moves past it in the same transaction
-- (audit_head's conditional update), and verification finds an id named
-- twice (the second link's hash cannot match where it stands).
CREATE TABLE audit_round (
    seq       bigint   PRIMARY KEY,
    event_ids bigint[] NOT NULL,
    prev_hash bytea    NOT NULL,
    hashes    bytea    NOT NULL,
    CONSTRAINT audit_round_seq_positive CHECK (seq >= 1),
    CONSTRAINT audit_round_sizes CHECK (cardinality(event_ids) >= 1 AND length(prev_hash) = 32
        AND length(hashes) = 32 * cardinality(event_ids))
);

-- An existing chain becomes rounds of one event each: every stored link,
-- its prev_hash included, is kept exactly as it was, so a chain tampered
-- with before this migration fails verification at the same seq after it.
INSERT INTO audit_round (seq, event_ids, prev_hash, hashes)
SELECT seq, ARRAY[event_id], prev_hash, hash FROM audit_chain;
DROP TABLE audit_chain;

CREATE VIEW audit_chain AS
SELECT r.seq + u.o - 1 AS seq, u.id AS event_id,
    CASE WHEN u.o = 1 THEN r.prev_hash ELSE substring(r.hashes FROM (u.o::int - 2) * 32 + 1 FOR 32) END AS prev_hash,
    substring(r.hashes FROM (u.o::int - 1) * 32 + 1 FOR 32) AS hash
FROM audit_round r CROSS JOIN LATERAL unnest(r.event_ids) WITH ORDINALITY AS u(id, o);

-- +goose Down
CREATE TABLE audit_chain_links AS SELECT seq, event_id, prev_hash, hash FROM audit_chain;
DROP VIEW audit_chain;
DROP TABLE audit_round;
ALTER TABLE audit_chain_links RENAME TO audit_chain;
ALTER TABLE audit_chain ALTER COLUMN seq SET NOT NULL, ALTER COLUMN event_id SET NOT NULL,
    ALTER COLUMN prev_hash SET NOT NULL, ALTER COLUMN hash SET NOT NULL,
    ADD PRIMARY KEY (seq),
    ADD CONSTRAINT audit_chain_seq_positive CHECK (seq >= 1),
    ADD CONSTRAINT audit_chain_hash_size CHECK (length(prev_hash) = 32 AND length(hash) = 32);
CREATE UNIQUE INDEX audit_chain_event ON audit_chain (event_id);
