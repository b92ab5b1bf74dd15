package audit

import (
	"context"
	"fmt"
	"time"
)

// SealParams say who seals, for how long the lease lasts and how many
// events one round takes at most.
type SealParams struct {
	Holder string
	Lease  time.Duration
	Limit  int
}

// SealResult is what one round did.
type SealResult struct {
	// Sealed is how many events it appended to the chain.
	Sealed int
	// Holding: the caller holds the lease after the round.
	Holding bool
}

// Seal runs one round of the sealer: unless another live process holds
// the lease, it reads what may be sealed, hashes it here, outside any
// transaction, and appends it in one short transaction that checks the
// head did not move (Store.AuditChainAppend). Writers never wait for it:
// it reads committed rows, and its own write touches only the chain's
// tables. A holder with nothing to seal renews its lease once half of it
// has passed; a process that finds the lease expired takes it, so a dead
// holder is replaced within one lease.
func Seal(ctx context.Context, st Store, p SealParams) (SealResult, error) {
	head, err := st.AuditHeadGet(ctx)
	if err != nil {
		return SealResult{}, fmt.Errorf("read the chain's head: %w", err)
	}
	mine := head.Holder == p.Holder && head.LeaseLeft > 0
	if !mine && head.Holder != "" && head.LeaseLeft > 0 {
		return SealResult{}, nil
	}
	list, err := st.AuditSealableList(ctx, SealableListParams{After: head.Cursor, Limit: p.Limit})
	if err != nil {
		return SealResult{}, fmt.Errorf("list the events to seal: %w", err)
	}
	if len(list.Events) == 0 && mine && head.LeaseLeft > p.Lease/2 {
		return SealResult{Holding: true}, nil
	}
	links := make([]Link, len(list.Events))
	prev := head.Hash
	var c chainer
	for i, ev := range list.Events {
		h := c.next(prev, ev)
		links[i] = Link{Seq: head.Seq + int64(i) + 1, EventID: ev.ID, PrevHash: prev, Hash: h}
		prev = h
	}
	cursor := head.Cursor
	if len(links) > 0 {
		cursor = list.Cursor
	}
	ok, err := st.AuditChainAppend(ctx, ChainAppendParams{Holder: p.Holder, Lease: p.Lease, Seq: head.Seq,
		Links: links, Cursor: cursor})
	if err != nil {
		return SealResult{}, fmt.Errorf("append %d events to the chain after seq %d: %w", len(links), head.Seq, err)
	}
	if !ok {
		return SealResult{}, nil
	}
	return SealResult{Sealed: len(links), Holding: true}, nil
}

// ReleaseLease ends holder's lease now, if it still holds it, so that
// another process takes over at once instead of after the lease (a
// graceful shutdown).
func ReleaseLease(ctx context.Context, st Store, holder string) error {
	head, err := st.AuditHeadGet(ctx)
	if err != nil {
		return err
	}
	if head.Holder != holder || head.LeaseLeft <= 0 {
		return nil
	}
	_, err = st.AuditChainAppend(ctx, ChainAppendParams{Holder: holder, Release: true, Seq: head.Seq, Cursor: head.Cursor})
	return err
}
