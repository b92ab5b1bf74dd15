-- +goose Up
-- The SQLite twin of postgres/00022_audit_rounds.sql: one row per sealing
-- round. event_ids is a JSON array of the events' ids in seal order (link
-- k = 0, 1, … is seq + k, its event event_ids[k], its hash bytes 32k+1 …
-- 32(k+1) of hashes, its prev_hash the hash before it); the view
-- audit_chain gives the links one a row, as the table of that name did.
CREATE TABLE audit_round (
    seq       INTEGER PRIMARY KEY NOT NULL,
    event_ids TEXT    NOT NULL,
    prev_hash BLOB    NOT NULL,
    hashes    BLOB    NOT NULL,
    CONSTRAINT audit_round_seq_positive CHECK (seq >= 1),
    CONSTRAINT audit_round_sizes CHECK (json_valid(event_ids) AND json_type(event_ids) = 'array'
        AND json_array_length(event_ids) >= 1 AND length(prev_hash) = 32
        AND length(hashes) = 32 * json_array_length(event_ids))
) STRICT;

-- An existing chain becomes rounds of one event each, every stored link
-- kept exactly as it was.
INSERT INTO audit_round (seq, event_ids, prev_hash, hashes)
SELECT seq, json_array(event_id), prev_hash, hash FROM audit_chain;
DROP TABLE audit_chain;

CREATE VIEW audit_chain AS
SELECT r.seq + j.key AS seq, j.value AS event_id,
    CASE WHEN j.key = 0 THEN r.prev_hash ELSE substr(r.hashes, (j.key - 1) * 32 + 1, 32) END AS prev_hash,
    substr(r.hashes, j.key * 32 + 1, 32) AS hash
FROM audit_round r, json_each(r.event_ids) j;

-- +goose Down
-- The links one a row again, in the table as 00016 made it.
CREATE TABLE audit_chain_links AS SELECT seq, event_id, prev_hash, hash FROM audit_chain;
DROP VIEW audit_chain;
DROP TABLE audit_round;
CREATE TABLE audit_chain (
    seq       INTEGER PRIMARY KEY NOT NULL,
    event_id  INTEGER NOT NULL,
    prev_hash BLOB    NOT NULL,
    hash      BLOB    NOT NULL,
    CONSTRAINT audit_chain_seq_positive CHECK (seq >= 1),
    CONSTRAINT audit_chain_hash_size CHECK (length(prev_hash) = 32 AND length(hash) = 32)
) STRICT;
INSERT INTO audit_chain (seq, event_id, prev_hash, hash) SELECT seq, event_id, prev_hash, hash FROM audit_chain_links;
DROP TABLE audit_chain_links;
CREATE UNIQUE INDEX audit_chain_event ON audit_chain (event_id);
