package queue_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/approvals/approvals/queue"
)

func TestEditedPointers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		before, after string
		want          []string
	}{
		{"equal", `{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`, nil},
		{"key order and spacing", `{"a":1,"b":"x"}`, ` { "b" : "x", "a" : 1 } `, nil},
		{"number spelling", `{"n":1,"m":[2.50]}`, `{"n":1.0,"m":[25e-1]}`, nil},
		{"one leaf", `{"subject":"Hi","body":"x"}`, `{"subject":"Hello","body":"x"}`, []string{"/subject"}},
		{"sorted by key", `{"z":1,"a":1,"m":1}`, `{"z":2,"a":2,"m":1}`, []string{"/a", "/z"}},
		{"nested leaf", `{"to":{"name":"Sam","addr":"s@x"}}`, `{"to":{"name":"Sam","addr":"t@x"}}`, []string{"/to/addr"}},
		{"added key", `{"a":1}`, `{"a":1,"cc":{"x":1}}`, []string{"/cc"}},
		{"removed key", `{"a":1,"cc":"x"}`, `{"a":1}`, []string{"/cc"}},
		{"escaped tokens", `{"a/b":1,"c~d":1,"~1":1}`, `{"a/b":2,"c~d":2,"~1":2}`, []string{"/a~1b", "/c~0d", "/~01"}},
		{"empty key", `{"":1}`, `{"":2}`, []string{"/"}},
		{"same length array per index", `{"items":[{"q":1},{"q":2}]}`, `{"items":[{"q":1},{"q":3}]}`, []string{"/items/1/q"}},
		{"array indexes in number order", `{"l":[0,0,0,0,0,0,0,0,0,0,0,0]}`, `{"l":[0,0,1,0,0,0,0,0,0,0,0,1]}`, []string{"/l/2", "/l/11"}},
		{"longer array whole", `{"tags":["a","b"]}`, `{"tags":["x","a","b"]}`, []string{"/tags"}},
		{"type change", `{"v":{"a":1}}`, `{"v":"a"}`, []string{"/v"}},
		{"null to value", `{"v":null}`, `{"v":0}`, []string{"/v"}},
		{"root type", `{"a":1}`, `[1]`, []string{""}},
		{"not JSON", `{"a":1}`, `{"a":`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := queue.EditedPointers([]byte(tc.before), []byte(tc.after))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("EditedPointers(%s, %s) = %q, want %q", tc.before, tc.after, got, tc.want)
			}
		})
	}
}

func TestActionEditedFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		payload, approved string
		want              string
	}{
		{"not decided", `{"a":1}`, ``, `null`},
		{"approved as submitted", `{"a":1}`, `{"a":1}`, `null`},
		{"approved with an equal spelling", `{"a":1}`, `{"a":1.0}`, `null`},
		{"edited", `{"a":1,"b":"x"}`, `{"a":1,"b":"y"}`, `["/b"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &queue.Action{Payload: json.RawMessage(tc.payload)}
			if tc.approved != "" {
				a.ApprovedPayload = json.RawMessage(tc.approved)
			}
			b, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				EditedFields json.RawMessage `json:"edited_fields"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if string(got.EditedFields) != tc.want {
				t.Fatalf("edited_fields = %s, want %s", got.EditedFields, tc.want)
			}
		})
	}
}

// FuzzEditedPointers checks the properties that make the pointers useful:
// a document compared with itself has none; every pointer reported
// resolves in at least one of the two documents, to values that differ;
// and replacing each reported value of before with after's makes the
// documents equal (nothing edited is missed).
func FuzzEditedPointers(f *testing.F) {
	f.Add(`{"a":1,"b":{"c":"x","d":[1,2]}}`, `{"a":1.0,"b":{"c":"y","d":[1,3]},"e/f":null}`)
	f.Add(`{"~":[{"x":1}],"s":"a b c"}`, `{"~":[{"x":2}],"s":"a c"}`)
	f.Add(`{}`, `{"a":[]}`)
	f.Fuzz(func(t *testing.T, before, after string) {
		var vb, va map[string]any
		if json.Unmarshal([]byte(before), &vb) != nil || json.Unmarshal([]byte(after), &va) != nil || vb == nil || va == nil {
			t.Skip()
		}
		if got := queue.EditedPointers([]byte(before), []byte(before)); got != nil {
			t.Fatalf("a document against itself: %q", got)
		}
		ptrs := queue.EditedPointers([]byte(before), []byte(after))
		if queue.JSONEqual([]byte(before), []byte(after)) != (ptrs == nil) {
			t.Fatalf("JSONEqual = %v but pointers %q", queue.JSONEqual([]byte(before), []byte(after)), ptrs)
		}
		patched := []byte(before)
		for _, p := range ptrs {
			old, inB := queue.PointerValue([]byte(before), p)
			nw, inA := queue.PointerValue([]byte(after), p)
			if !inB && !inA {
				t.Fatalf("pointer %q resolves in neither document", p)
			}
			if inB && inA && queue.JSONEqual(old, nw) {
				t.Fatalf("pointer %q: %s and %s are equal", p, old, nw)
			}
			patched = setPointer(t, patched, p, nw, inA)
		}
		if !queue.JSONEqual(patched, []byte(after)) {
			t.Fatalf("before with the reported fields replaced is %s, want %s (pointers %q)", patched, after, ptrs)
		}
	})
}

// setPointer replaces (or removes, when !exists) the value at p, a pointer
// whose parent exists in doc.
func setPointer(t *testing.T, doc []byte, p string, v json.RawMessage, exists bool) []byte {
	t.Helper()
	if p == "" {
		return v
	}
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		t.Fatal(err)
	}
	toks := splitPointer(p)
	parent := root
	for _, tok := range toks[:len(toks)-1] {
		switch x := parent.(type) {
		case map[string]any:
			parent = x[tok]
		case []any:
			parent = x[atoi(t, tok)]
		}
	}
	last := toks[len(toks)-1]
	var val any
	if exists {
		if err := json.Unmarshal(v, &val); err != nil {
			t.Fatal(err)
		}
	}
	switch x := parent.(type) {
	case map[string]any:
		if exists {
			x[last] = val
		} else {
			delete(x, last)
		}
	case []any:
		x[atoi(t, last)] = val
	default:
		t.Fatalf("pointer %q: parent is not a container", p)
	}
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func splitPointer(p string) []string {
	var out []string
	for _, tok := range splitSlash(p[1:]) {
		out = append(out, unescape(tok))
	}
	return out
}

func splitSlash(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func unescape(tok string) string {
	var b []byte
	for i := 0; i < len(tok); i++ {
		if tok[i] == '~' && i+1 < len(tok) {
			if tok[i+1] == '1' {
				b = append(b, '/')
			} else {
				b = append(b, '~')
			}
			i++
			continue
		}
		b = append(b, tok[i])
	}
	return string(b)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("index %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}
