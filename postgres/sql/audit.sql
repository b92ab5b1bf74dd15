-- The audit chain (audit.Store): its head, the events that may be sealed,
-- the links.

-- fragment: auditEventColumns
-- An event as the chain hashes it, with its action's submission for a
-- submitted event (the join is on kind, so no other event reads an action).
coalesce(e.action_id::text, ''), coalesce(e.subject, ''), coalesce(e.kind, ''), coalesce(e.actor, ''),
    coalesce(e.channel, ''), coalesce(e.at, 'epoch'), e.data,
    a.id IS NOT NULL, coalesce(a.tool, ''), coalesce(a.class, ''), coalesce(a.intent_key, ''),
    coalesce(a.attempt, 0), a.payload, coalesce(a.requested_by, '')

-- name: auditHeadGetSQL
-- The lease is judged on the database's clock, which every process
-- sharing it shares.
SELECT seq, hash, cursor_txid::text, cursor_id, sealed_at, coalesce(holder, ''),
    coalesce((extract(epoch FROM lease_until - clock_timestamp()) * 1000)::bigint, 0),
    verified_at, coalesce(verified_seq, 0), coalesce(verified_ok, false), coalesce(verified_detail, '')
FROM audit_head WHERE id = 1;

-- name: auditSealableListSQL
-- The events after the cursor in seal order (txid, id), up to the oldest
-- transaction still running when this statement's snapshot was taken
-- (pg_snapshot_xmin of that snapshot): every transaction with a smaller id
-- has ended and is visible to this very snapshot, and no transaction can
-- be given a smaller id again, so no event can ever join those below it
-- (docs/audit.md). A later transaction that committed first waits here for
-- the older one. It reads committed rows and takes no lock. The round's
-- events are taken first and each submitted one's action read by its key
-- (the LIMIT keeps the lateral read from being flattened into a join):
-- as one join, the planner hashed the whole of actions for a round of
-- about a thousand events whenever the table was small enough for that to
-- look cheaper (auto_explain of the claim cycle at 10,000-30,000 actions),
-- a cost per round that grew with the table.
SELECT e.id, {{auditEventColumns}}, e.txid::text
FROM (
    SELECT * FROM events e
    WHERE (e.txid, e.id) > ($1::text::xid8, $2) AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY e.txid, e.id LIMIT $3
) e LEFT JOIN LATERAL (
    SELECT * FROM actions a WHERE e.kind = 'submitted' AND a.id = e.action_id LIMIT 1
) a ON true
ORDER BY e.txid, e.id;

-- name: auditHeadAdvanceSQL
-- Moves the head from seq $1 and takes or renews the lease, only if the
-- head is still there and the lease is $6's or free: of two sealers that
-- read one head, the second finds it moved (its update waits for the
-- first's row lock, then reads the row again) and appends nothing.
UPDATE audit_head SET seq = $2, hash = coalesce($3, hash), cursor_txid = $4::text::xid8, cursor_id = $5,
    sealed_at = CASE WHEN $2 > seq THEN clock_timestamp() ELSE sealed_at END,
    holder = $6, lease_until = clock_timestamp() + $7::float8 * interval '1 millisecond'
WHERE id = 1 AND seq = $1
    AND (holder = $6 OR holder IS NULL OR lease_until IS NULL OR lease_until <= clock_timestamp());

-- name: auditChainInsertSQL
-- One round's links as one row (migrations/postgres/00022_audit_rounds.sql):
-- the first seq $1, the events $2 in order, the hash before the first $3
-- and their hashes end to end $4, 32 bytes each. One row and one index
-- entry per round, whatever its size.
INSERT INTO audit_round (seq, event_ids, prev_hash, hashes) VALUES ($1, $2, $3, $4);

-- name: auditChainListSQL
-- The links after seq $1, one a row, at most $2. A round holds at least
-- one link, so the round holding seq $1 and the $2 after it hold them
-- all: the read stays a range of the primary key however long the chain.
-- A link whose event row is gone reads with found false.
WITH r AS (
    SELECT * FROM audit_round
    WHERE seq >= coalesce((SELECT max(seq) FROM audit_round WHERE seq <= $1), 0)
    ORDER BY seq LIMIT $2::int + 1
)
SELECT r.seq + u.o - 1 AS link_seq, u.id,
    CASE WHEN u.o = 1 THEN r.prev_hash ELSE substring(r.hashes FROM (u.o::int - 2) * 32 + 1 FOR 32) END,
    substring(r.hashes FROM (u.o::int - 1) * 32 + 1 FOR 32),
    e.id IS NOT NULL, coalesce(e.id, 0), {{auditEventColumns}}
FROM r CROSS JOIN LATERAL unnest(r.event_ids) WITH ORDINALITY AS u(id, o)
    LEFT JOIN events e ON e.id = u.id
    LEFT JOIN actions a ON e.kind = 'submitted' AND a.id = e.action_id
WHERE r.seq + u.o - 1 > $1 ORDER BY link_seq, r.seq LIMIT $2;

-- name: auditUnsealedCountSQL
-- A range of events_seal_order.
SELECT count(*) FROM audit_head h JOIN events e ON (e.txid, e.id) > (h.cursor_txid, h.cursor_id) WHERE h.id = 1;

-- name: auditStrayListSQL
-- Events at or before the cursor that are not in the chain, each with the
-- seq of the first sealed event after it (the chain is in seal order). It
-- reads the whole table, as the verification that calls it reads the
-- whole chain: one hash anti-join against every round's ids. The CTE is
-- materialized so that the LIMIT does not talk the planner into a nested
-- loop over the rounds for every event (no index names an event's round).
WITH stray AS MATERIALIZED (
    SELECT e.id, e.txid FROM audit_head h JOIN events e ON (e.txid, e.id) <= (h.cursor_txid, h.cursor_id)
    WHERE h.id = 1 AND NOT EXISTS (SELECT 1 FROM audit_round r, unnest(r.event_ids) AS u(id) WHERE u.id = e.id)
)
SELECT e.id, {{auditEventColumns}},
    coalesce((SELECT min(c.seq) FROM audit_chain c JOIN events f ON f.id = c.event_id
              WHERE (f.txid, f.id) > (s.txid, s.id)), 0)
FROM stray s JOIN events e ON e.id = s.id
    LEFT JOIN actions a ON e.kind = 'submitted' AND a.id = e.action_id
ORDER BY s.txid, s.id LIMIT $1;

-- name: auditVerificationSaveSQL
UPDATE audit_head SET verified_at = $1, verified_seq = $2, verified_ok = $3, verified_detail = $4 WHERE id = 1;
