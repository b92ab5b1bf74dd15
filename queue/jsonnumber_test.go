package queue

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"
)

// numberEqual agrees with math/big on numbers small enough for it.
func TestNumberEqual(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want bool
	}{
		{"1", "1.0", true}, {"1", "1e0", true}, {"100", "1e2", true}, {"1E+2", "100.000", true},
		{"0.001", "1e-3", true}, {"-0", "0", true}, {"0e5", "0.000", true}, {"-1.5", "-15e-1", true},
		{"1", "-1", false}, {"1", "2", false}, {"10", "1", false}, {"0.1", "1", false}, {"1e2", "1e3", false},
		{"12", "21", false}, {"0", "1e-400", false},
		// Exponents past int64, compared digit by digit.
		{"1e99999999999999999999999", "10e99999999999999999999998", true},
		{"1e99999999999999999999999", "1e99999999999999999999998", false},
		{"1e-99999999999999999999999", "0.1e-99999999999999999999998", true},
		{"123e-00000000000000000000000000001", "12.3", true},
		{"1e100000000000000000000", "1e20", false},
	}
	for _, tt := range tests {
		if got := numberEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("numberEqual(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := numberEqual(tt.b, tt.a); got != tt.want {
			t.Errorf("numberEqual(%s, %s) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
		ra, ok1 := new(big.Rat).SetString(tt.a)
		rb, ok2 := new(big.Rat).SetString(tt.b)
		if len(tt.a)+len(tt.b) < 40 && ok1 && ok2 {
			if big := ra.Cmp(rb) == 0; big != tt.want {
				t.Errorf("math/big says %s == %s is %v; the table is wrong", tt.a, tt.b, big)
			}
		}
	}
}

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
		if !json.Valid(a) || !json.Valid(b) || CheckStrictJSON(a, 0) != nil || CheckStrictJSON(b, 0) != nil {
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
