package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"strconv"
	"time"
)

// Event is what the chain seals of one row of the events table: exactly
// these fields are hashed (EventJSON), nothing else of the row.
type Event struct {
	ID int64
	// ActionID is the action the event belongs to; "" for a staff event.
	ActionID string
	// Subject is what a staff event is about (user:EMAIL, token:NAME);
	// "" for an action's event.
	Subject string
	Kind    string
	Actor   string
	Channel string
	At      time.Time
	// Data is the event's JSON, nil when it has none.
	Data json.RawMessage
	// Action is what was submitted, for an event of kind submitted (nil
	// for every other kind, and when the action's row is gone).
	Action *Submission
}

// Submission is what an action was submitted with and never changes
// afterwards: the submitted event binds it, so that the chain records what
// was approved, not only who approved it.
type Submission struct {
	Tool        string
	Class       string
	IntentKey   string
	Attempt     int
	Payload     json.RawMessage
	RequestedBy string
}

// KindSubmitted is the kind whose events carry their action's Submission.
const KindSubmitted = "submitted"

// EventJSON is the canonical JSON of e, the bytes its hash covers:
//
//	{"action":S,"action_id":A,"actor":"…","at":"…","channel":"…","data":D,"id":N,"kind":"…","subject":U}
//
// with every member always present, in this (RFC 8785) order: S is null or
// {"attempt":N,"class":"…","intent_key":"…","payload":P,"requested_by":"…","tool":"…"};
// A and U are a string or null; D and P are canonical JSON (Canonical) or
// null; at is RFC 3339 in UTC with as many fractional digits as the store
// keeps (trailing zeros dropped).
func EventJSON(e Event) []byte {
	n := 256 + len(e.Data)
	if e.Action != nil {
		n += len(e.Action.Payload)
	}
	return AppendEventJSON(make([]byte, 0, n), e)
}

// AppendEventJSON appends EventJSON(e) to out.
func AppendEventJSON(out []byte, e Event) []byte {
	out = append(out, `{"action":`...)
	if s := e.Action; s != nil {
		out = append(out, `{"attempt":`...)
		out = strconv.AppendInt(out, int64(s.Attempt), 10)
		out = append(out, `,"class":`...)
		out = appendString(out, s.Class)
		out = append(out, `,"intent_key":`...)
		out = appendString(out, s.IntentKey)
		out = append(out, `,"payload":`...)
		out = appendJSON(out, s.Payload)
		out = append(out, `,"requested_by":`...)
		out = appendString(out, s.RequestedBy)
		out = append(out, `,"tool":`...)
		out = appendString(out, s.Tool)
		out = append(out, '}')
	} else {
		out = append(out, "null"...)
	}
	out = append(out, `,"action_id":`...)
	out = appendOptional(out, e.ActionID)
	out = append(out, `,"actor":`...)
	out = appendString(out, e.Actor)
	out = append(out, `,"at":`...)
	out = append(out, '"') // a time needs no escape
	out = appendTime(out, e.At)
	out = append(out, '"')
	out = append(out, `,"channel":`...)
	out = appendString(out, e.Channel)
	out = append(out, `,"data":`...)
	out = appendJSON(out, e.Data)
	out = append(out, `,"id":`...)
	out = strconv.AppendInt(out, e.ID, 10)
	out = append(out, `,"kind":`...)
	out = appendString(out, e.Kind)
	out = append(out, `,"subject":`...)
	out = appendOptional(out, e.Subject)
	return append(out, '}')
}

// FormatTime is how an event's time is written in its canonical JSON.
func FormatTime(t time.Time) string { return string(appendTime(nil, t)) }

func appendTime(out []byte, t time.Time) []byte { return t.UTC().AppendFormat(out, time.RFC3339Nano) }

func appendOptional(out []byte, s string) []byte {
	if s == "" {
		return append(out, "null"...)
	}
	return appendString(out, s)
}

func appendJSON(out []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(out, "null"...)
	}
	return appendCanonicalOrString(out, raw)
}

// Hash is one link of the chain: SHA-256(previous hash || EventJSON).
type Hash [sha256.Size]byte

// String is the hash in lowercase hex, as exports write it.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash reads a hash written by String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("hash %q: want %d hex digits", s, 2*len(h))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("hash %q: %w", s, err)
	}
	return h, nil
}

// HashFromBytes reads a hash stored as 32 bytes.
func HashFromBytes(b []byte) (Hash, error) {
	var h Hash
	if len(b) != len(h) {
		return h, fmt.Errorf("stored hash has %d bytes, want %d", len(b), len(h))
	}
	copy(h[:], b)
	return h, nil
}

// HashAfter is the hash that follows prev for an event whose canonical JSON
// is canonical: SHA-256 of the 32 bytes of prev, then those bytes. The
// first event's prev is the zero hash.
func HashAfter(prev Hash, canonical []byte) Hash {
	h := sha256.New()
	h.Write(prev[:])
	h.Write(canonical)
	var out Hash
	h.Sum(out[:0])
	return out
}

// Next is the hash that follows prev for e.
func Next(prev Hash, e Event) Hash { return HashAfter(prev, EventJSON(e)) }

// chainer hashes events one after another, reusing its buffer and its
// digest (the sealer's round hashes a thousand at a time).
type chainer struct {
	buf    []byte
	digest hash.Hash
}

// next is Next(prev, e).
func (c *chainer) next(prev Hash, e Event) Hash {
	if c.digest == nil {
		c.digest = sha256.New()
	}
	c.buf = AppendEventJSON(c.buf[:0], e)
	c.digest.Reset()
	c.digest.Write(prev[:])
	c.digest.Write(c.buf)
	var out Hash
	c.digest.Sum(out[:0])
	return out
}
