package queue_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/approvals/approvals/queue"
)

func TestCheckNoDuplicateKeys(t *testing.T) {
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
			err := queue.CheckNoDuplicateKeys([]byte(tt.in))
			switch {
			case tt.dup:
				if !errors.Is(err, queue.ErrDuplicateKey) {
					t.Fatalf("CheckNoDuplicateKeys(%s) = %v, want a duplicate key error", tt.in, err)
				}
				if !strings.Contains(err.Error(), tt.mention) {
					t.Fatalf("error %q does not name %s", err, tt.mention)
				}
			case tt.invalid:
				if err == nil || errors.Is(err, queue.ErrDuplicateKey) {
					t.Fatalf("CheckNoDuplicateKeys(%s) = %v, want an invalid JSON error", tt.in, err)
				}
			default:
				if err != nil {
					t.Fatalf("CheckNoDuplicateKeys(%s) = %v, want nil", tt.in, err)
				}
			}
		})
	}
}

// FuzzCheckNoDuplicateKeys checks that, on input without duplicate keys,
// the strict check and encoding/json agree on what is valid JSON: the
// check refuses nothing else that the decoders behind it accept.
func FuzzCheckNoDuplicateKeys(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"a":[1,2,{"b":null}]}}`, `[1,"x",true]`, `1e400`,
		`{"a":1,"a":2}`, `{"a":"\u00e9"}`, ` {"a" : 1 } `, `{"a":1}x`, `"\ud800"`, "\"\xff\"", `-0`, `01`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := queue.CheckNoDuplicateKeys(data)
		if errors.Is(err, queue.ErrDuplicateKey) {
			// A refusal either way; a truncated input may show its
			// duplicate before its end.
			return
		}
		if got, want := err == nil, json.Valid(data); got != want {
			t.Fatalf("CheckNoDuplicateKeys(%q) = %v, json.Valid = %v", data, err, want)
		}
	})
}
