package queue

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/payload"
)

// The payload: numbers that differ as text and must be compared as
// values. math/big built a million-digit integer for each (about a second
// apiece on this machine, so this payload took tens of seconds); compared
// digit by digit it is microseconds. The bound leaves a margin of a
// hundred times for a loaded machine and the race detector.
func TestJSONEqualLargeExponentsLinear(t *testing.T) {
	t.Parallel()
	var a, b strings.Builder
	a.WriteString(`{"n":[`)
	b.WriteString(`{"n":[`)
	for i := range 20 {
		if i > 0 {
			a.WriteByte(',')
			b.WriteByte(',')
		}
		a.WriteString("1e999999")
		b.WriteString("10e999998")
	}
	a.WriteString(`]}`)
	b.WriteString(`]}`)
	start := time.Now()
	if !JSONEqual([]byte(a.String()), []byte(b.String())) {
		t.Fatal("1e999999 and 10e999998 are the same number")
	}
	if JSONEqual([]byte(a.String()), []byte(strings.Replace(b.String(), "10e999998", "10e999999", 1))) {
		t.Fatal("1e999999 and 10e999999 are different numbers")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("comparing two %d-byte payloads took %s", a.Len(), d)
	}
}

// FuzzJSONEqual checks the payload comparison: reflexive and symmetric on
// any two documents, and, on documents within the limits the faces
// enforce, the same answer as comparing every number with math/big. The
// corpus (testdata/fuzz/FuzzJSONEqual) holds the numbers.
func FuzzJSONEqual(f *testing.F) {
	for _, p := range [][2]string{
		{`{"n":1e999999}`, `{"n":10e999998}`}, {`{"n":1}`, `{"n":1.0}`}, {`{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{`[0.001]`, `[1e-3]`}, {`[-0]`, `[0]`}, {`{"n":1e400}`, `{"n":1e401}`}, {`[1,2]`, `[2,1]`},
		{`{"a":[{"b":0.5}]}`, `{"a":[{"b":5e-1}]}`}, {`{"x":"1"}`, `{"x":1}`}, {`[1e-99999999999999999999]`, `[10e-100000000000000000000]`},
	} {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ab, ba := JSONEqual(a, b), JSONEqual(b, a)
		if ab != ba {
			t.Fatalf("JSONEqual(%q, %q) = %v, reversed %v", a, b, ab, ba)
		}
		if json.Valid(a) && !JSONEqual(a, a) {
			t.Fatalf("JSONEqual(%q, itself) = false", a)
		}
		if !json.Valid(a) || !json.Valid(b) || payload.CheckStrictJSON(a, 0) != nil || payload.CheckStrictJSON(b, 0) != nil {
			return
		}
		va, _ := decodeValue(a)
		vb, _ := decodeValue(b)
		if want := valuesEqual(va, vb, bigNumberEqual); ab != want {
			t.Fatalf("JSONEqual(%q, %q) = %v, math/big says %v", a, b, ab, want)
		}
	})
}

// bigNumberEqual compares two numbers with math/big: the reference, for
// numbers small enough to build.
func bigNumberEqual(x, y string) bool {
	rx, ok1 := new(big.Rat).SetString(x)
	ry, ok2 := new(big.Rat).SetString(y)
	return ok1 && ok2 && rx.Cmp(ry) == 0
}
