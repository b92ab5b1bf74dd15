package payload_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
	"unicode/utf8"

	"github.com/approvals/approvals/payload"
)

// StrictMembers must split a body exactly as encoding/json decodes it into
// a map of raw members, and refuse exactly what CheckStrictJSON refuses.
func FuzzStrictMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"tool":"t","payload":{"a":1},"intent_key":"k"}`,
		"{\n\t\"tool\" :\t\"t\" ,\r\n \"payload\" : { \"a\" : [1, 2, {\"b\": null}] } }\n",
		`{"to\u006fl":"t"}`, `{"a\"b":"x\"y"}`, `{"\ud83d\ude00":1}`, `{"a":"}"}`, `{"a":"\\"}`,
		`{"a":1e5,"b":-0.5,"c":true,"d":false,"e":null,"f":[],"g":{}}`, `{"a":[[[]]],"b":{"c":{"d":{}}}}`,
		`[]`, `[{"a":1}]`, `"s"`, `1`, `null`, ``, `{`, `{"a":1,}`, `{"a":1}{}`, `{"a":1} x`,
		`{"a":1,"a":2}`, `{"a":1e999}`, `{"a":{"b":1,"b":2}}`, `{"a" 1}`, `{1:2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) || bytes.Contains(data, []byte(`\u0000`)) {
			return // decodeObjectFields refuses or takes its slow path first
		}
		got, err := payload.StrictMembers(data)
		want := payload.CheckStrictJSON(data, 0)
		if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
			t.Fatalf("StrictMembers(%q) error %v, CheckStrictJSON %v", data, err, want)
		}
		if err != nil {
			if got != nil {
				t.Fatalf("StrictMembers(%q) returned members with an error", data)
			}
			return
		}
		var decoded map[string]json.RawMessage
		if derr := json.Unmarshal(data, &decoded); derr != nil || decoded == nil {
			if got != nil {
				t.Fatalf("StrictMembers(%q) = %v, but encoding/json finds no object (%v)", data, got, derr)
			}
			return
		}
		if got == nil {
			t.Fatalf("StrictMembers(%q) found no object; encoding/json found %v", data, decoded)
		}
		if !maps.EqualFunc(got, decoded, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("StrictMembers(%q) = %q, encoding/json %q", data, got, decoded)
		}
	})
}
