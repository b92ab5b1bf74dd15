package payload_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/approvals/approvals/payload"
)

func TestCheckStrictJSONDuplicateKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		dup      bool   // a duplicate key error
		invalid  bool   // some other error
		mention  string // the error names this
	}{
		{name: "flat object", in: `{"a":1,"b":2}`},
		{name: "same key in sibling objects", in: `{"a":{"x":1},"b":{"x":2}}`},
		{name: "same key at two depths", in: `{"x":{"x":{"x":1}}}`},
		{name: "array of objects", in: `[{"id":1},{"id":2}]`},
		{name: "scalar", in: `"x"`},
		{name: "top-level duplicate", in: `{"to":"a@example.com","to":"b@example.com"}`, dup: true, mention: `"to" at /to`},
		{name: "nested duplicate", in: `{"a":{"b":1,"b":2}}`, dup: true, mention: `/a/b`},
		{name: "duplicate in array element", in: `{"items":[{"id":1},{"id":1,"id":2}]}`, dup: true, mention: `/items/1/id`},
		{name: "duplicate spelled with an escape", in: `{"to":1,"t\u006f":2}`, dup: true, mention: `"to"`},
		{name: "duplicate key with a slash", in: `{"a/b":1,"a/b":2}`, dup: true, mention: `"a/b"`},
		{name: "empty keys", in: `{"":1,"":2}`, dup: true},
		{name: "truncated", in: `{"a":1`, invalid: true},
		{name: "trailing data", in: `{"a":1} {}`, invalid: true},
		{name: "empty", in: ``, invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := payload.CheckStrictJSON([]byte(tt.in), 0)
			switch {
			case tt.dup:
				if !errors.Is(err, payload.ErrDuplicateKey) {
					t.Fatalf("CheckStrictJSON(%s) = %v, want a duplicate key error", tt.in, err)
				}
				if !strings.Contains(err.Error(), tt.mention) {
					t.Fatalf("error %q does not name %s", err, tt.mention)
				}
			case tt.invalid:
				if err == nil || errors.Is(err, payload.ErrDuplicateKey) {
					t.Fatalf("CheckStrictJSON(%s) = %v, want an invalid JSON error", tt.in, err)
				}
			default:
				if err != nil {
					t.Fatalf("CheckStrictJSON(%s) = %v, want nil", tt.in, err)
				}
			}
		})
	}
}

// FuzzStrictJSON checks that the strict pass refuses only valid JSON it
// means to refuse (a duplicate key, a number out of range, too deep a
// nesting) and otherwise agrees with encoding/json on what is valid JSON.
// The corpus (testdata/fuzz/FuzzStrictJSON) holds the cases of the
// hardening issues.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"a":[1,2,{"b":null}]}}`, `[1,"x",true]`, `1e400`,
		`{"a":1,"a":2}`, `{"a":"\u00e9"}`, ` {"a" : 1 } `, `{"a":1}x`, `"\ud800"`, "\"\xff\"", `-0`, `01`,
		`{"n":1e999999}`, `{"n":10e999998}`, `[0.` + strings.Repeat("0", 400) + `1]`, `[` + strings.Repeat("9", 101) + `]`,
		strings.Repeat("[", 65) + strings.Repeat("]", 65), strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 64),
		`{"to":"a","To":"b"}`, `[1e401`, `{"a":[1,2` + strings.Repeat("[", 70)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := payload.CheckStrictJSON(data, 0)
		if payload.StrictRefusal(err) {
			// A refusal either way; a truncated input may show what is
			// refused before its end.
			return
		}
		if got, want := err == nil, json.Valid(data); got != want {
			t.Fatalf("CheckStrictJSON(%q) = %v, json.Valid = %v", data, err, want)
		}
	})
}

// Numbers past the limits and nesting past 64 are refused, naming where;
// numbers and depths at the limits pass.
func TestCheckStrictJSONLimits(t *testing.T) {
	t.Parallel()
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	digits := func(n int) string { return "1" + strings.Repeat("2", n-1) }
	tests := []struct {
		name, in string
		outer    int
		want     error  // nil: accepted
		mention  string // the error names this
	}{
		{name: "100 digits", in: `{"n":` + digits(100) + `}`},
		{name: "101 digits", in: `{"n":` + digits(101) + `}`, want: payload.ErrNumberOutOfRange, mention: "/n"},
		{name: "101 digits after the point", in: `{"n":0.` + digits(101) + `}`, want: payload.ErrNumberOutOfRange, mention: "100 significant digits"},
		{name: "leading zeros do not count", in: `[0.000` + digits(100) + `]`},
		{name: "trailing zeros count", in: `[1` + strings.Repeat("0", 100) + `]`, want: payload.ErrNumberOutOfRange, mention: "/0"},
		{name: "long zero", in: `[0.` + strings.Repeat("0", 300) + `]`},
		{name: "exponent 400", in: `[1e400, -1e-400, 1E+400]`},
		{name: "exponent 401", in: `{"a":{"b":[1,1e401]}}`, want: payload.ErrNumberOutOfRange, mention: "/a/b/1"},
		{name: "exponent -401", in: `[1e-401]`, want: payload.ErrNumberOutOfRange, mention: "±400"},
		{name: "the issue's number", in: `{"n":1e999999}`, want: payload.ErrNumberOutOfRange, mention: "/n"},
		{name: "huge exponent of zero", in: `[0e99999999999999999999]`, want: payload.ErrNumberOutOfRange},
		{name: "exponent with leading zeros", in: `[1e000000000000400]`},
		{name: "normalised exponent past 400", in: `[10e400]`, want: payload.ErrNumberOutOfRange, mention: "normalised"},
		{name: "small normalised", in: `[0.` + strings.Repeat("0", 400) + `1]`, want: payload.ErrNumberOutOfRange, mention: "normalised"},
		{name: "top-level number", in: `1e401`, want: payload.ErrNumberOutOfRange, mention: "at /"},
		{name: "depth 64", in: nest(64)},
		{name: "depth 65", in: nest(65), want: payload.ErrTooDeep, mention: "deeper than 64"},
		{name: "depth 62 inside arguments", in: nest(62), outer: 2},
		{name: "depth 63 inside arguments", in: nest(63), outer: 2, want: payload.ErrTooDeep},
		{name: "deep objects", in: strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat(`}`, 65), want: payload.ErrTooDeep, mention: "/a/a"},
		{name: "the issue's nesting", in: nest(9990), want: payload.ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := payload.CheckStrictJSON([]byte(tt.in), tt.outer)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckStrictJSON = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !payload.StrictRefusal(err) {
				t.Fatalf("CheckStrictJSON = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("error %q does not name %s", err, tt.mention)
			}
		})
	}
}
