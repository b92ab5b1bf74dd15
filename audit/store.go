package audit

import (
	"context"
	"fmt"
	"time"
)

// Store is the chain's half of storage (storage.Store embeds it). Every
// method takes the context and at most one params struct, and returns one
// result beside the error, as queue.Store does; the conformance suite in
// storetest runs against every implementation.
type Store interface {
	// AuditHeadGet returns the chain's head: its last link, the seal
	// cursor, the lease and the last verification.
	AuditHeadGet(ctx context.Context) (Head, error)
	// AuditSealableList returns, in seal order, at most p.Limit events
	// after p.After that may be sealed now: every event before them in
	// that order is committed and can never be joined by another
	// (PostgreSQL: their transactions and every older one have ended;
	// SQLite: committed, since its writes are serialised). It writes
	// nothing and never waits for a writer.
	AuditSealableList(ctx context.Context, p SealableListParams) (SealableList, error)
	// AuditChainAppend appends p.Links and moves the head to the last of
	// them and to p.Cursor, in one transaction, only if the head is still
	// at p.Seq and the lease is p.Holder's or free; it then holds the
	// lease for p.Lease from now (p.Release: it ends now). It reports
	// whether it did: false when another sealer moved the head or holds
	// the lease, and then nothing is written. Both stores keep the links
	// of one call as one row (its first seq, the event ids and hashes),
	// whose primary key on the first seq refuses a second append from one
	// head whatever the callers do; links that do not follow one another
	// (ChainAppendParams.Check) are an error.
	AuditChainAppend(ctx context.Context, p ChainAppendParams) (bool, error)
	// AuditChainList returns at most p.Limit links after seq p.AfterSeq,
	// in seq order, each with its event as stored now (nil when the event
	// row is gone).
	AuditChainList(ctx context.Context, p ChainListParams) ([]SealedEvent, error)
	// AuditUnsealedCount counts the events not yet sealed.
	AuditUnsealedCount(ctx context.Context) (int64, error)
	// AuditStrayList returns at most limit events that lie before the seal
	// cursor yet are not in the chain: rows written into the table after
	// their place was sealed, which only a hand on the database can do.
	AuditStrayList(ctx context.Context, limit int) ([]Stray, error)
	// AuditVerificationSave records the outcome of a verification of the
	// database, which AuditHeadGet then returns.
	AuditVerificationSave(ctx context.Context, v Verification) error
}

// Cursor is a position in seal order: PostgreSQL orders events by the id
// of the transaction that wrote them, then their id; SQLite by id alone
// (TxID 0), which is its commit order.
type Cursor struct {
	TxID uint64
	ID   int64
}

// Head is the state of the chain.
type Head struct {
	// Seq and Hash are the last link (0 and the zero hash for an empty
	// chain); Cursor is the position of its event.
	Seq    int64
	Hash   Hash
	Cursor Cursor
	// SealedAt is when a link was last appended; nil before the first.
	SealedAt *time.Time
	// Holder holds the sealer's lease for LeaseLeft more (expired when not
	// positive); "" when nobody ever held it.
	Holder    string
	LeaseLeft time.Duration
	// Verified is the last verification of the database; nil when none.
	Verified *Verification
}

// Verification is the outcome of one verification of the database.
type Verification struct {
	At time.Time
	// Seq is the last seq checked; OK whether the chain held up to there.
	Seq    int64
	OK     bool
	Detail string
}

// SealableListParams select events to seal: after After, at most Limit.
type SealableListParams struct {
	After Cursor
	Limit int
}

// SealableList are events in seal order and the position of the last.
type SealableList struct {
	Events []Event
	Cursor Cursor
}

// Link is one row of the chain.
type Link struct {
	Seq      int64
	EventID  int64
	PrevHash Hash
	Hash     Hash
}

// ChainAppendParams append links after the head at Seq (see
// Store.AuditChainAppend).
type ChainAppendParams struct {
	Holder  string
	Lease   time.Duration
	Release bool
	Seq     int64
	Links   []Link
	Cursor  Cursor
}

// Check reports links that do not follow one another: seqs p.Seq+1,
// p.Seq+2, … and each link's PrevHash the hash of the one before it. A
// store may then keep a link's event and hash alone (both stores do).
func (p ChainAppendParams) Check() error {
	for i, l := range p.Links {
		if l.Seq != p.Seq+int64(i)+1 || i > 0 && l.PrevHash != p.Links[i-1].Hash {
			return fmt.Errorf("link %d (seq %d) does not follow the one before it", i, l.Seq)
		}
	}
	return nil
}

// ChainListParams page through the chain.
type ChainListParams struct {
	AfterSeq int64
	Limit    int
}

// SealedEvent is a link with its event as stored now.
type SealedEvent struct {
	Link
	Event *Event
}

// Stray is an event that should be in the chain and is not; Before is the
// seq of the first sealed event after it in seal order (0: none).
type Stray struct {
	Event  Event
	Before int64
}
