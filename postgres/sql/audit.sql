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
-- the older one. It reads committed rows and takes no lock.
SELECT e.id, {{auditEventColumns}}, e.txid::text
FROM events e LEFT JOIN actions a ON e.kind = 'submitted' AND a.id = e.action_id
WHERE (e.txid, e.id) > ($1::text::xid8, $2) AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY e.txid, e.id LIMIT $3;

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
-- The links after seq $1, of the events $2 in order: $4 is their hashes end
-- to end, 32 bytes each, and each link's prev_hash is the hash before it,
-- the first's $3 (the head's). One bytea, not an array of them, is what
-- the sealer's round costs least to send.
INSERT INTO audit_chain (seq, event_id, prev_hash, hash)
SELECT $1::bigint + u.o, u.id,
    CASE WHEN u.o = 1 THEN $3::bytea ELSE substring($4::bytea FROM (u.o::int - 2) * 32 + 1 FOR 32) END,
    substring($4::bytea FROM (u.o::int - 1) * 32 + 1 FOR 32)
FROM unnest($2::bigint[]) WITH ORDINALITY AS u(id, o);

-- name: auditChainListSQL
-- A link whose event row is gone reads with found false.
SELECT c.seq, c.event_id, c.prev_hash, c.hash, e.id IS NOT NULL, coalesce(e.id, 0), {{auditEventColumns}}
FROM audit_chain c LEFT JOIN events e ON e.id = c.event_id
    LEFT JOIN actions a ON e.kind = 'submitted' AND a.id = e.action_id
WHERE c.seq > $1 ORDER BY c.seq LIMIT $2;

-- name: auditUnsealedCountSQL
-- A range of events_seal_order.
SELECT count(*) FROM audit_head h JOIN events e ON (e.txid, e.id) > (h.cursor_txid, h.cursor_id) WHERE h.id = 1;

-- name: auditStrayListSQL
-- Events at or before the cursor that are not in the chain, each with the
-- seq of the first sealed event after it. It reads the whole table, as the
-- verification that calls it reads the whole chain.
SELECT e.id, {{auditEventColumns}},
    coalesce((SELECT c.seq FROM events f JOIN audit_chain c ON c.event_id = f.id
              WHERE (f.txid, f.id) > (e.txid, e.id) ORDER BY f.txid, f.id LIMIT 1), 0)
FROM audit_head h JOIN events e ON (e.txid, e.id) <= (h.cursor_txid, h.cursor_id)
    LEFT JOIN actions a ON e.kind = 'submitted' AND a.id = e.action_id
WHERE h.id = 1 AND NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.event_id = e.id)
ORDER BY e.txid, e.id LIMIT $1;

-- name: auditVerificationSaveSQL
UPDATE audit_head SET verified_at = $1, verified_seq = $2, verified_ok = $3, verified_detail = $4 WHERE id = 1;
