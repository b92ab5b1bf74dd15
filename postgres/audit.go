package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/audit"
)

// The chain is kept in audit_round (one row per sealing round, read one
// link a row through the view audit_chain) and audit_head beside the events
// (migrations/postgres/00016_audit.sql, 00022_audit_rounds.sql). The sealer reads committed events
// below the horizon of its statement's snapshot (auditSealableListSQL),
// hashes them in Go and appends them in one short transaction that locks
// only the head's row, so no submission or decision ever waits for it.

// auditEventScan holds auditEventColumns of one row.
type auditEventScan struct {
	ev        audit.Event
	data      []byte
	hasAction bool
	sub       audit.Submission
	payload   []byte
}

func (r *auditEventScan) dest() []any {
	return []any{&r.ev.ActionID, &r.ev.Subject, &r.ev.Kind, &r.ev.Actor, &r.ev.Channel, &r.ev.At, &r.data,
		&r.hasAction, &r.sub.Tool, &r.sub.Class, &r.sub.IntentKey, &r.sub.Attempt, &r.payload, &r.sub.RequestedBy}
}

func (r *auditEventScan) event() audit.Event {
	ev := r.ev
	ev.At = ev.At.UTC()
	ev.Data = nullableJSON(r.data)
	if r.hasAction {
		sub := r.sub
		sub.Payload = nullableJSON(r.payload)
		ev.Action = &sub
	}
	return ev
}

func parseTxID(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("transaction id %q: %w", s, err)
	}
	return n, nil
}

// AuditHeadGet implements audit.Store.
func (s *Store) AuditHeadGet(ctx context.Context) (audit.Head, error) {
	var (
		h           audit.Head
		hash        []byte
		txid        string
		leaseMillis int64
		verifiedAt  *time.Time
		verified    audit.Verification
		sealedAt    *time.Time
	)
	err := s.pool.QueryRow(ctx, auditHeadGetSQL).Scan(&h.Seq, &hash, &txid, &h.Cursor.ID, &sealedAt, &h.Holder, &leaseMillis,
		&verifiedAt, &verified.Seq, &verified.OK, &verified.Detail)
	if err != nil {
		return audit.Head{}, fmt.Errorf("read the audit chain's head: %w", err)
	}
	if h.Hash, err = audit.HashFromBytes(hash); err != nil {
		return audit.Head{}, fmt.Errorf("read the audit chain's head: %w", err)
	}
	if h.Cursor.TxID, err = parseTxID(txid); err != nil {
		return audit.Head{}, err
	}
	if sealedAt != nil {
		t := sealedAt.UTC()
		h.SealedAt = &t
	}
	h.LeaseLeft = time.Duration(leaseMillis) * time.Millisecond
	if verifiedAt != nil {
		verified.At = verifiedAt.UTC()
		h.Verified = &verified
	}
	return h, nil
}

// AuditSealableList implements audit.Store.
func (s *Store) AuditSealableList(ctx context.Context, p audit.SealableListParams) (audit.SealableList, error) {
	rows, err := s.pool.Query(ctx, auditSealableListSQL, strconv.FormatUint(p.After.TxID, 10), p.After.ID, p.Limit)
	if err != nil {
		return audit.SealableList{}, fmt.Errorf("list events to seal: %w", err)
	}
	defer rows.Close()
	// One scan target for every row (each scan writes every field anew).
	var (
		r    auditEventScan
		txid string
	)
	dest := append(append([]any{&r.ev.ID}, r.dest()...), &txid)
	out := audit.SealableList{Events: make([]audit.Event, 0, min(max(p.Limit, 0), 4096))}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return audit.SealableList{}, fmt.Errorf("list events to seal: %w", err)
		}
		out.Events = append(out.Events, r.event())
	}
	if err := rows.Err(); err != nil {
		return audit.SealableList{}, fmt.Errorf("list events to seal: %w", err)
	}
	if n := len(out.Events); n > 0 {
		if out.Cursor.TxID, err = parseTxID(txid); err != nil {
			return audit.SealableList{}, err
		}
		out.Cursor.ID = out.Events[n-1].ID
	}
	return out, nil
}

// AuditChainAppend implements audit.Store: the head's conditional update,
// then the links, in one transaction.
func (s *Store) AuditChainAppend(ctx context.Context, p audit.ChainAppendParams) (bool, error) {
	// The links are stored as one row of the round: their first seq, event
	// ids and hashes (auditChainInsertSQL).
	if err := p.Check(); err != nil {
		return false, fmt.Errorf("append to the audit chain after seq %d: %w", p.Seq, err)
	}
	head := p.Seq
	var hash []byte // nil: the hash stays
	if n := len(p.Links); n > 0 {
		head = p.Links[n-1].Seq
		h := p.Links[n-1].Hash
		hash = h[:]
	}
	lease := p.Lease.Milliseconds()
	if p.Release {
		lease = 0
	}
	var ok bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, auditHeadAdvanceSQL, p.Seq, head, hash, strconv.FormatUint(p.Cursor.TxID, 10), p.Cursor.ID,
			p.Holder, lease)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if len(p.Links) > 0 {
			ids, hashes := make([]int64, len(p.Links)), make([]byte, 0, len(p.Links)*len(audit.Hash{}))
			for i, l := range p.Links {
				ids[i] = l.EventID
				hashes = append(hashes, l.Hash[:]...)
			}
			first := p.Links[0].PrevHash
			if _, err := tx.Exec(ctx, auditChainInsertSQL, p.Links[0].Seq, ids, first[:], hashes); err != nil {
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
	rows, err := s.pool.Query(ctx, auditChainListSQL, p.AfterSeq, p.Limit)
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
		if err := rows.Scan(append([]any{&se.Seq, &se.EventID, &prev, &hash, &found, &r.ev.ID}, r.dest()...)...); err != nil {
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

// AuditUnsealedCount implements audit.Store.
func (s *Store) AuditUnsealedCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, auditUnsealedCountSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("count unsealed events: %w", err)
	}
	return n, nil
}

// AuditStrayList implements audit.Store.
func (s *Store) AuditStrayList(ctx context.Context, limit int) ([]audit.Stray, error) {
	rows, err := s.pool.Query(ctx, auditStrayListSQL, limit)
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
		if err := rows.Scan(append(append([]any{&r.ev.ID}, r.dest()...), &before)...); err != nil {
			return nil, fmt.Errorf("look for events outside the audit chain: %w", err)
		}
		out = append(out, audit.Stray{Event: r.event(), Before: before})
	}
	return out, rows.Err()
}

// AuditVerificationSave implements audit.Store.
func (s *Store) AuditVerificationSave(ctx context.Context, v audit.Verification) error {
	tag, err := s.pool.Exec(ctx, auditVerificationSaveSQL, v.At, v.Seq, v.OK, v.Detail)
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("the audit chain's head is missing")
	}
	if err != nil {
		return fmt.Errorf("record the audit verification: %w", err)
	}
	return nil
}
