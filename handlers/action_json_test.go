package handlers

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// TestAppendJSONMatchesEncodingJSON: the hand-written encoder writes every
// action byte for byte as encoding/json does, over random actions whose
// strings mix escapes, HTML characters, invalid UTF-8 and line separators,
// and whose stored JSON has white space to compact.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "Zz9", " ", "\"", "\\", "<", ">", "&", "\n", "\t", "\r", "\b", "\f", "\x00", "\x1f", "\x7f",
		"é", "日本", "\u2028", "\u2029", "\xff", "\xe2\x80", "😀", "\ufffd"}
	str := func() string {
		var b []byte
		for range r.IntN(6) {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		return string(b)
	}
	strp := func() *string {
		if r.IntN(2) == 0 {
			return nil
		}
		s := str()
		return &s
	}
	raws := []string{``, `{}`, `{"a":1}`, `{ "a" : [1, 2.50, "x y"] }`, `{"h":"<b>&amp;</b>"}`, "{\"s\":\"\u2028\"}", `{"n":1e400}`, "\n{\"a\":null}\n", `{"k":"é"}`, `{"a":2,"b/~c":{"d":[1,2]}}`, `{"a":1,"b/~c":{"d":[1,3]}}`, `{"a":1,"b/~c":{"d":[1]}}`}
	raw := func() json.RawMessage {
		s := raws[r.IntN(len(raws))]
		if s == "" {
			return nil
		}
		return json.RawMessage(s)
	}
	tm := func() time.Time {
		return time.Unix(r.Int64N(4_000_000_000), r.Int64N(1e9)*int64(r.IntN(2))).UTC()
	}
	tmp := func() *time.Time {
		if r.IntN(2) == 0 {
			return nil
		}
		x := tm()
		return &x
	}
	for i := range 3000 {
		a := &queue.Action{ID: str(), Tool: str(), Class: classify.Class(str()), IntentKey: str(), Attempt: r.IntN(1000),
			State: queue.State(str()), Payload: raw(), ApprovedPayload: raw(), Result: raw(), Error: strp(),
			RequestedBy: str(), DecidedBy: strp(), DecisionNote: strp(), CreatedAt: tm(), DecidedAt: tmp(),
			ClaimedAt: tmp(), FinishedAt: tmp(), ExpiresAt: tmp()}
		switch r.IntN(3) {
		case 0:
			a.Warnings = []string{}
		case 1:
			a.Warnings = []string{str(), str()}
		}
		a.ApprovalsRequired = r.IntN(5)
		switch r.IntN(3) {
		case 0:
			a.Approvals = []queue.Approval{}
		case 1:
			a.Approvals = []queue.Approval{{By: str(), At: tm(), Note: str()}, {By: str(), At: tm()}}
		}
		if r.IntN(2) == 0 {
			a.Ticket = &queue.Ticket{ID: str(), Kind: queue.TicketKind(str()), State: queue.TicketState(str()),
				OpenedAt: tm(), ResolvedAt: tmp(), ResolvedBy: strp(), Note: strp()}
			if r.IntN(2) == 0 {
				o := queue.State(str())
				a.Ticket.Outcome = &o
			}
		}
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendActionJSON(nil, a)
		if !ok {
			t.Fatalf("action %d: appendActionJSON declined a UTC action", i)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("action %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestAppendJSONDeclinesOtherTimes: times encoding/json has its own rules
// for are left to it.
func TestAppendJSONDeclinesOtherTimes(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		a := &queue.Action{CreatedAt: at}
		if b, ok := appendActionJSON([]byte("x"), a); ok || string(b) != "x" {
			t.Errorf("created_at %v: appendActionJSON = %q, %v; want it declined with nothing appended", at, b, ok)
		}
	}
}
