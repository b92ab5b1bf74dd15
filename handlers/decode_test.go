package handlers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/approvals/approvals/queue"
)

func TestDecodeSubmit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, header string
		wantKey            string
		wantErr            string // substring of the detail; "" for success
	}{
		{"minimal", `{"tool":"t","payload":{}}`, "", "", ""},
		{"key in body", `{"tool":"t","payload":{"a":1},"intent_key":"k:1"}`, "", "k:1", ""},
		{"key in header", `{"tool":"t","payload":{}}`, "k:2", "k:2", ""},
		{"same key in both", `{"tool":"t","payload":{},"intent_key":"k"}`, "k", "k", ""},
		{"null key", `{"tool":"t","payload":{},"intent_key":null}`, "", "", ""},
		{"keys differ", `{"tool":"t","payload":{},"intent_key":"a"}`, "b", "", "differ"},
		{"empty body", ``, "", "", "empty"},
		{"not JSON", `tool=t`, "", "", "not valid JSON"},
		{"array", `[]`, "", "", "must be a JSON object"},
		{"trailing data", `{"tool":"t","payload":{}} {}`, "", "", "after the JSON object"},
		{"unknown field", `{"tool":"t","payload":{},"x":1}`, "", "", `unknown field "x"`},
		{"missing payload", `{"tool":"t"}`, "", "", "payload is required"},
		{"payload string", `{"tool":"t","payload":"x"}`, "", "", "payload must be a JSON object"},
		{"payload null", `{"tool":"t","payload":null}`, "", "", "payload must be a JSON object"},
		{"tool empty", `{"tool":"","payload":{}}`, "", "", "tool must be"},
		{"tool number", `{"tool":1,"payload":{}}`, "", "", "tool must be a string"},
		{"key number", `{"tool":"t","payload":{},"intent_key":5}`, "", "", "intent_key must be a string"},
		{"key empty", `{"tool":"t","payload":{},"intent_key":""}`, "", "", "intent_key"},
		{"key too long", `{"tool":"t","payload":{},"intent_key":"` + strings.Repeat("a", 256) + `"}`, "", "", "intent_key"},
		{"key newline", `{"tool":"t","payload":{},"intent_key":"a\nb"}`, "", "", "intent_key"},
		{"header control char", `{"tool":"t","payload":{}}`, "a\tb", "", "Idempotency-Key"},
		{"NUL in nested value", `{"tool":"t","payload":{"a":[{"b":"x\u0000"}]}}`, "", "", "payload.a[0].b contains a NUL"},
		{"NUL in key", `{"tool":"t","payload":{"a\u0000":1}}`, "", "", "NUL"},
		{"invalid UTF-8", "{\"tool\":\"t\",\"payload\":{\"a\":\"\xc3\x28\"}}", "", "", "UTF-8"},
		// An escaped backslash before u0000 is no NUL; a number beyond
		// float64 is still valid JSON, with or without a NUL elsewhere.
		{"escaped backslash and a huge number", `{"tool":"t","payload":{"a":"C:\\u0000x","n":1e400}}`, "", "", ""},
		{"duplicate payload key", `{"tool":"t","payload":{"to":"a","to":"b"}}`, "", "", `duplicate key "to" at /payload/to`},
		{"duplicate nested key", `{"tool":"t","payload":{"a":[{"b":1,"b":2}]}}`, "", "", `/payload/a/0/b`},
		{"duplicate body field", `{"tool":"t","tool":"u","payload":{}}`, "", "", `duplicate key "tool"`},
		{"NUL and a huge number", `{"tool":"t","payload":{"n":1e400,"a":"\u0000"}}`, "", "", "payload.a contains a NUL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb, err := DecodeSubmit([]byte(tc.body), tc.header)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if sb.IntentKey != tc.wantKey {
					t.Fatalf("key %q, want %q", sb.IntentKey, tc.wantKey)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %q; want an error containing %q", tc.body, tc.wantErr)
			}
			if queue.ErrorCode(err) != queue.CodeInvalidRequest || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v; want invalid_request containing %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzDecodeSubmit checks that decoding never panics, refuses with
// invalid_request only, and that whatever it accepts is safe to store.
func FuzzDecodeSubmit(f *testing.F) {
	for _, s := range []string{
		`{"tool":"t","payload":{}}`,
		`{"tool":"send_customer_email","payload":{"customer_id":17,"topic":"x"},"intent_key":"email:17:x"}`,
		`{"tool":"t","payload":{"a":"\u0000"}}`,
		`{"tool":"t","payload":{"a":1e999}}`,
		`{"tool":"t","payload":[]}`,
		"{\"tool\":\"\xff\",\"payload\":{}}",
		`{"tool":"t","payload":{"a":{"b":[1,2,{"c":null}]}},"intent_key":"k"}`,
		`{"tool":"t","payload":{}}garbage`,
		``,
	} {
		f.Add([]byte(s), "")
	}
	f.Add([]byte(`{"tool":"t","payload":{}}`), "k:1")
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		sb, err := DecodeSubmit(body, header)
		if err != nil {
			if queue.ErrorCode(err) != queue.CodeInvalidRequest {
				t.Fatalf("error with code %q: %v", queue.ErrorCode(err), err)
			}
			return
		}
		if sb.Tool == "" || !utf8.ValidString(sb.Tool) {
			t.Fatalf("accepted tool %q", sb.Tool)
		}
		if p := bytes.TrimSpace(sb.Payload); len(p) == 0 || p[0] != '{' {
			t.Fatalf("accepted payload %q", sb.Payload)
		}
		if _, err := queue.DecodeObject(sb.Payload); err != nil {
			t.Fatalf("accepted payload does not decode: %v", err)
		}
		if _, nul := findNULRaw(sb.Payload); nul {
			t.Fatalf("accepted a NUL character: %q", sb.Payload)
		}
		// The fields read as encoding/json reads them.
		var want struct {
			Tool      string `json:"tool"`
			IntentKey string `json:"intent_key"`
		}
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("accepted a body encoding/json refuses: %v", err)
		}
		if header == "" && (sb.Tool != want.Tool || sb.IntentKey != want.IntentKey) {
			t.Fatalf("read tool %q key %q, encoding/json reads %q %q", sb.Tool, sb.IntentKey, want.Tool, want.IntentKey)
		}
	})
}

// findNULRaw is the test's own oracle: does any string or key of the
// payload hold U+0000?
func findNULRaw(payload []byte) (string, bool) {
	v, err := queue.DecodeObject(payload)
	if err != nil {
		return "", false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case string:
			return strings.ContainsRune(x, 0)
		case map[string]any:
			for k, e := range x {
				if strings.ContainsRune(k, 0) || walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return "payload", walk(v)
}

// TestDashboardJSONFieldsReadNumbersAsTheAPIDoes: a ticket result and an
// edited payload accept what POST /complete and submissions accept (1e400
// is valid JSON), and still refuse NULs and trailing data.
func TestDashboardJSONFieldsReadNumbersAsTheAPIDoes(t *testing.T) {
	t.Parallel()
	if err := checkResult(`{"n":1e400}`); err != nil {
		t.Errorf("result with 1e400: %v", err)
	}
	if err := checkEditedPayload(`{"n":1e400}`); err != nil {
		t.Errorf("edited payload with 1e400: %v", err)
	}
	for _, bad := range []string{`{"a":"\u0000"}`, `{"a":1} {}`, `{"a":`} {
		if checkResult(bad) == nil || checkEditedPayload(bad) == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
