package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/approvals/approvals/audit"
)

// The chain is kept in audit_round, one row per sealing round (read one
// link a row through the view audit_chain), and audit_head
// (migrations/sqlite/00016_audit.sql, 00022_audit_rounds.sql).
//
// SQLite orders the chain by event id: every write holds the database's
// one write lock, so ids are handed out in commit order and an event
// committed after another always has the larger id. The sealer reads what
// is committed through the read pool, hashes it outside the writer, and
// appends through the writer, whose write lock serialises it with every
// other write ("the single writer seals").

// auditEventColumns are what an audit.Event is read from: the event and,
// for a submitted one, its action's submission (the join is on kind, so
// other events read no action).
const auditEventColumns = `e.id, coalesce(e.action_id, ''), coalesce(e.subject, ''), e.kind, e.actor, e.channel, e.at, e.data,
	a.id IS NOT NULL, coalesce(a.tool, ''), coalesce(a.class, ''), coalesce(a.intent_key, ''), coalesce(a.attempt, 0),
	a.payload, coalesce(a.requested_by, '')`

const auditEventJoin = `LEFT JOIN actions a ON e.kind = 'submitted' AND a.id = e.action_id`

// auditEventScan holds the columns of auditEventColumns for one row.
type auditEventScan struct {
	ev        audit.Event
	at        string
	data      sql.NullString
	hasAction bool
	sub       audit.Submission
	payload   sql.NullString
}

func (r *auditEventScan) dest() []any {
	return []any{&r.ev.ID, &r.ev.ActionID, &r.ev.Subject, &r.ev.Kind, &r.ev.Actor, &r.ev.Channel, &r.at, &r.data,
		&r.hasAction, &r.sub.Tool, &r.sub.Class, &r.sub.IntentKey, &r.sub.Attempt, &r.payload, &r.sub.RequestedBy}
}

// event is the scanned event. A time this store could not have written
// (only a hand on the file writes one) reads as the zero time, which hashes
// differently from what was sealed, rather than failing the read.
func (r *auditEventScan) event() audit.Event {
	ev := r.ev
	ev.At, _ = parseTime(r.at)
	ev.Data = rawJSON(r.data)
	if r.hasAction {
		sub := r.sub
		sub.Payload = rawJSON(r.payload)
		ev.Action = &sub
	}
	return ev
}

// AuditHeadGet implements audit.Store; the lease is judged on this host's
// clock, which every process sharing the file shares.
func (s *Store) AuditHeadGet(ctx context.Context) (audit.Head, error) {
	var (
		h                            audit.Head
		hash                         []byte
		sealedAt, holder, leaseUntil sql.NullString
		verifiedAt, verifiedDetail   sql.NullString
		verifiedSeq                  sql.NullInt64
		verifiedOK                   sql.NullBool
	)
	err := s.read.QueryRowContext(ctx, `SELECT seq, hash, cursor_id, sealed_at, holder, lease_until,
	verified_at, verified_seq, verified_ok, verified_detail FROM audit_head WHERE id = 1`).Scan(
		&h.Seq, &hash, &h.Cursor.ID, &sealedAt, &holder, &leaseUntil, &verifiedAt, &verifiedSeq, &verifiedOK, &verifiedDetail)
	if err != nil {
		return audit.Head{}, fmt.Errorf("read the audit chain's head: %w", err)
	}
	if h.Hash, err = audit.HashFromBytes(hash); err != nil {
		return audit.Head{}, fmt.Errorf("read the audit chain's head: %w", err)
	}
	if h.SealedAt, err = parseNullTime(sealedAt); err != nil {
		return audit.Head{}, err
	}
	h.Holder = holder.String
	if leaseUntil.Valid {
		until, err := parseTime(leaseUntil.String)
		if err != nil {
			return audit.Head{}, err
		}
		h.LeaseLeft = time.Until(until)
	}
	if verifiedAt.Valid {
		at, err := parseTime(verifiedAt.String)
		if err != nil {
			return audit.Head{}, err
		}
		h.Verified = &audit.Verification{At: at, Seq: verifiedSeq.Int64, OK: verifiedOK.Bool, Detail: verifiedDetail.String}
	}
	return h, nil
}

// AuditSealableList implements audit.Store: what is committed after the
// cursor, in id order.
func (s *Store) AuditSealableList(ctx context.Context, p audit.SealableListParams) (audit.SealableList, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+auditEventColumns+` FROM events e `+auditEventJoin+`
	WHERE e.id > ? ORDER BY e.id LIMIT ?`, p.After.ID, p.Limit)
	if err != nil {
		return audit.SealableList{}, fmt.Errorf("list events to seal: %w", err)
	}
	defer rows.Close()
	// One scan target for every row (each scan writes every field anew,
	// and database/sql copies what it scans into a []byte).
	var r auditEventScan
	dest := r.dest()
	out := audit.SealableList{Events: make([]audit.Event, 0, min(max(p.Limit, 0), 4096))}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return audit.SealableList{}, fmt.Errorf("list events to seal: %w", err)
		}
		ev := r.event()
		out.Events = append(out.Events, ev)
		out.Cursor = audit.Cursor{ID: ev.ID}
	}
	return out, rows.Err()
}

// AuditChainAppend implements audit.Store in one write call of the writer.
func (s *Store) AuditChainAppend(ctx context.Context, p audit.ChainAppendParams) (bool, error) {
	if err := p.Check(); err != nil {
		return false, fmt.Errorf("append to the audit chain after seq %d: %w", p.Seq, err)
	}
	var ok bool
	err := s.withTx(ctx, func(ctx context.Context, q querier) error {
		ok = false
		now := time.Now()
		until := now.Add(p.Lease)
		if p.Release {
			until = now
		}
		head := p.Seq
		if n := len(p.Links); n > 0 {
			head = p.Links[n-1].Seq
		}
		var hash any // NULL: the hash stays
		if n := len(p.Links); n > 0 {
			h := p.Links[n-1].Hash
			hash = h[:]
		}
		res, err := q.ExecContext(ctx, `UPDATE audit_head SET seq = ?, hash = coalesce(?, hash), cursor_id = ?,
	sealed_at = CASE WHEN ? > seq THEN ? ELSE sealed_at END, holder = ?, lease_until = ?
	WHERE id = 1 AND seq = ? AND (holder = ? OR holder IS NULL OR lease_until IS NULL OR lease_until <= ?)`,
			head, hash, p.Cursor.ID, head, fmtTime(now), p.Holder, fmtTime(until), p.Seq, p.Holder, fmtTime(now))
		n, err := rowsAffected(res, err)
		if err != nil || n == 0 {
			return err
		}
		if len(p.Links) > 0 {
			// One row for the round (migrations/sqlite/00022_audit_rounds.sql):
			// its first seq, the events' ids as a JSON array, the hash
			// before the first and the hashes end to end.
			ids := make([]byte, 0, len(p.Links)*8+2)
			hashes := make([]byte, 0, len(p.Links)*len(audit.Hash{}))
			ids = append(ids, '[')
			for i, l := range p.Links {
				if i > 0 {
					ids = append(ids, ',')
				}
				ids = strconv.AppendInt(ids, l.EventID, 10)
				hashes = append(hashes, l.Hash[:]...)
			}
			ids = append(ids, ']')
			first := p.Links[0]
			if _, err := q.ExecContext(ctx, `INSERT INTO audit_round (seq, event_ids, prev_hash, hashes) VALUES (?, ?, ?, ?)`,
				first.Seq, string(ids), first.PrevHash[:], hashes); err != nil {
				return err
			}
		}
		ok = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("append to the audit chain after seq %d: %w", p.Seq, err)
	}
	return ok, nil
}

// AuditChainList implements audit.Store.
func (s *Store) AuditChainList(ctx context.Context, p audit.ChainListParams) ([]audit.SealedEvent, error) {
	// A round holds at least one link, so the round holding seq AfterSeq
	// and the Limit after it hold every link asked for: the read stays a
	// range of the primary key however long the chain.
	rows, err := s.read.QueryContext(ctx, `WITH r AS (
		SELECT * FROM audit_round
		WHERE seq >= coalesce((SELECT max(seq) FROM audit_round WHERE seq <= ?1), 0)
		ORDER BY seq LIMIT ?2 + 1
	)
	SELECT r.seq + j.key AS link_seq, j.value,
		CASE WHEN j.key = 0 THEN r.prev_hash ELSE substr(r.hashes, (j.key - 1) * 32 + 1, 32) END,
		substr(r.hashes, j.key * 32 + 1, 32), e.id IS NOT NULL, `+auditEventColumnsOuter+`
	FROM r, json_each(r.event_ids) j LEFT JOIN events e ON e.id = j.value `+auditEventJoin+`
	WHERE r.seq + j.key > ?1 ORDER BY link_seq, r.seq LIMIT ?2`, p.AfterSeq, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list the audit chain: %w", err)
	}
	defer rows.Close()
	var out []audit.SealedEvent
	for rows.Next() {
		var (
			se         audit.SealedEvent
			prev, hash []byte
			found      bool
			r          auditEventScan
		)
		dest := append([]any{&se.Seq, &se.EventID, &prev, &hash, &found}, r.dest()...)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("list the audit chain: %w", err)
		}
		// A stored hash of the wrong size (the schema refuses one) reads as
		// the zero hash: it then fails verification rather than the read.
		se.PrevHash, _ = audit.HashFromBytes(prev)
		se.Hash, _ = audit.HashFromBytes(hash)
		if found {
			ev := r.event()
			se.Event = &ev
		}
		out = append(out, se)
	}
	return out, rows.Err()
}

// auditEventColumnsOuter is auditEventColumns for a row the outer join may
// leave without an event: every event column read with a default.
const auditEventColumnsOuter = `coalesce(e.id, 0), coalesce(e.action_id, ''), coalesce(e.subject, ''), coalesce(e.kind, ''),
	coalesce(e.actor, ''), coalesce(e.channel, ''), coalesce(e.at, ''), e.data,
	a.id IS NOT NULL, coalesce(a.tool, ''), coalesce(a.class, ''), coalesce(a.intent_key, ''), coalesce(a.attempt, 0),
	a.payload, coalesce(a.requested_by, '')`

// AuditUnsealedCount implements audit.Store: a range of the primary key.
func (s *Store) AuditUnsealedCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE id > (SELECT cursor_id FROM audit_head WHERE id = 1)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count unsealed events: %w", err)
	}
	return n, nil
}

// AuditStrayList implements audit.Store. It reads the whole events table,
// as the verification that calls it reads the whole chain.
func (s *Store) AuditStrayList(ctx context.Context, limit int) ([]audit.Stray, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+auditEventColumns+`,
	coalesce((SELECT min(c.seq) FROM audit_chain c WHERE c.event_id > e.id), 0)
	FROM events e `+auditEventJoin+`
	WHERE e.id <= (SELECT cursor_id FROM audit_head WHERE id = 1)
	  AND e.id NOT IN (SELECT j.value FROM audit_round r, json_each(r.event_ids) j WHERE j.value IS NOT NULL)
	ORDER BY e.id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("look for events outside the audit chain: %w", err)
	}
	defer rows.Close()
	var out []audit.Stray
	for rows.Next() {
		var (
			r      auditEventScan
			before int64
		)
		if err := rows.Scan(append(r.dest(), &before)...); err != nil {
			return nil, fmt.Errorf("look for events outside the audit chain: %w", err)
		}
		out = append(out, audit.Stray{Event: r.event(), Before: before})
	}
	return out, rows.Err()
}

// AuditVerificationSave implements audit.Store.
func (s *Store) AuditVerificationSave(ctx context.Context, v audit.Verification) error {
	n, err := s.exec(ctx, `UPDATE audit_head SET verified_at = ?, verified_seq = ?, verified_ok = ?, verified_detail = ? WHERE id = 1`,
		fmtTime(v.At), v.Seq, boolInt(v.OK), v.Detail)
	if err == nil && n != 1 {
		err = errors.New("the audit chain's head is missing")
	}
	if err != nil {
		return fmt.Errorf("record the audit verification: %w", err)
	}
	return nil
}
