package audit

import (
	"fmt"
	"iter"
)

// Entry is one link as a verifier reads it, from the database or from a
// line of an export.
type Entry struct {
	Seq      int64
	PrevHash Hash
	Hash     Hash
	// Event is the canonical JSON of the event as it is now.
	Event   []byte
	EventID int64
	// Where names the entry in messages ("line 12: "); "" for the database.
	Where string
	// Gone: the database's link names an event row that no longer exists.
	Gone bool
	// Malformed says why an export line could not be read as an entry.
	Malformed string
}

// What a verification found wrong at the first bad seq.
const (
	Changed   = "changed"   // an event's content (or its link's seq or hashes) differs from what was sealed
	Removed   = "removed"   // an event, or its link, is missing
	Inserted  = "inserted"  // an event stands in the chain where none was sealed
	Reordered = "reordered" // sealed events stand in another order
)

// Problem is the first seq at which the chain does not hold, and how.
type Problem struct {
	Seq    int64
	Kind   string
	Detail string
}

func (p *Problem) Error() string { return fmt.Sprintf("seq %d: %s: %s", p.Seq, p.Kind, p.Detail) }

// Anchor is the chain's state after seq: its last hash (the zero hash
// before seq 1).
type Anchor struct {
	Seq  int64
	Hash Hash
}

// Result is what Verify checked: the links after From up to Last held;
// Problem, when not nil, is the first that did not.
type Result struct {
	From, Last Anchor
	Problem    *Problem
}

// window is how far around a broken link Verify looks to tell a removal,
// an insertion and a reordering apart.
const window = 16

// Verify checks entries in order from the chain's state from: each link's
// hash must be SHA-256(its prev_hash || its event), its prev_hash the hash
// before it and its seq the next one. At the first that fails it looks at
// its neighbours to say what happened (changed, removed, inserted,
// reordered) and stops. The error is a failure to read entries, never a
// broken chain.
func Verify(entries iter.Seq2[Entry, error], from Anchor) (Result, error) {
	next, stop := iter.Pull2(entries)
	defer stop()
	var ahead []Entry
	var readErr error
	peek := func(n int) []Entry {
		for len(ahead) < n && readErr == nil {
			e, err, ok := next()
			if !ok {
				break
			}
			if err != nil {
				readErr = err
				break
			}
			ahead = append(ahead, e)
		}
		return ahead
	}
	res := Result{From: from, Last: from}
	var back []Entry
	for {
		if len(peek(1)) == 0 {
			return res, readErr
		}
		e := ahead[0]
		ahead = ahead[1:]
		if p := check(e, res.Last, back, peek); p != nil {
			if readErr != nil {
				return res, readErr
			}
			res.Problem = p
			return res, nil
		}
		res.Last = Anchor{Seq: e.Seq, Hash: e.Hash}
		back = append(back, e)
		if len(back) > window {
			back = back[1:]
		}
	}
}

// check judges e, which should follow last; back are the entries that held
// before it (the newest last), peek reads entries after it.
func check(e Entry, last Anchor, back []Entry, peek func(int) []Entry) *Problem {
	want := last.Seq + 1
	if e.Malformed != "" {
		return &Problem{want, Changed, e.Where + e.Malformed}
	}
	if e.Gone && e.Seq == want {
		return &Problem{want, Removed, fmt.Sprintf("%sits event (id %d) is gone from the events table", e.Where, e.EventID)}
	}
	intact := HashAfter(e.PrevHash, e.Event) == e.Hash
	linked := e.PrevHash == last.Hash
	switch {
	case intact && linked && e.Seq == want:
		return nil
	case intact && linked:
		return &Problem{want, Changed, fmt.Sprintf("%sthe entry after seq %d reads seq %d", e.Where, last.Seq, e.Seq)}
	case !intact:
		for _, o := range append(append([]Entry(nil), back...), peek(window)...) {
			if o.Seq != e.Seq && len(e.Event) > 0 && HashAfter(o.PrevHash, e.Event) == o.Hash {
				return &Problem{want, Reordered, fmt.Sprintf("%sthe event at seq %d (id %d) was sealed at seq %d", e.Where, want, e.EventID, o.Seq)}
			}
		}
		return &Problem{want, Changed, fmt.Sprintf("%sthe event (id %d) is not what was sealed: its content does not match its hash", e.Where, e.EventID)}
	}
	// The entry is intact but does not follow the one before it: it
	// follows a later entry (a reordering), or an entry stands where none
	// was sealed (the next one follows the last good one; or two follow
	// one), or one is missing.
	ahead := peek(window)
	for _, o := range ahead {
		if e.PrevHash == o.Hash {
			return &Problem{want, Reordered, fmt.Sprintf("%sthe entry after seq %d follows seq %d, which comes after it", e.Where, last.Seq, o.Seq)}
		}
	}
	if n := len(back); n > 0 {
		p := back[n-1]
		if len(ahead) > 0 && ahead[0].PrevHash == p.Hash {
			return &Problem{want, Inserted, fmt.Sprintf("%sthe entry after seq %d (event id %d, seq %d) was never sealed there: the one after it follows seq %d",
				e.Where, last.Seq, e.EventID, e.Seq, p.Seq)}
		}
		if e.PrevHash == p.PrevHash {
			// p and e both follow the entry before p, and the chain goes on
			// from e: p was never sealed there.
			return &Problem{p.Seq, Inserted, fmt.Sprintf("%sthe event at seq %d (id %d) was never sealed there: seq %d follows seq %d",
				p.Where, p.Seq, p.EventID, e.Seq, p.Seq-1)}
		}
		for j := n - 2; j >= 0; j-- {
			if e.PrevHash == back[j].Hash {
				return &Problem{back[j].Seq + 1, Inserted, fmt.Sprintf("%sseq %d follows seq %d: the %d entries between were never sealed",
					e.Where, e.Seq, back[j].Seq, n-1-j)}
			}
		}
	}
	detail := fmt.Sprintf("%sthe sealed event at seq %d is missing: the next entry does not follow seq %d", e.Where, want, last.Seq)
	if e.Seq > want {
		detail += fmt.Sprintf(" (the chain goes on at seq %d)", e.Seq)
	}
	return &Problem{want, Removed, detail}
}
