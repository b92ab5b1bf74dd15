package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

func TestDecodeArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		raw  string
		code queue.Code // "" for success
		in   string     // a word the detail must contain
	}{
		{"absent", "", "", ""},
		{"null", "null", "", ""},
		{"object", `{"a":1,"b":{"c":[1,"x"]}}`, "", ""},
		{"array", `[1]`, queue.CodeInvalidRequest, "object"},
		{"string", `"x"`, queue.CodeInvalidRequest, "object"},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", queue.CodeInvalidRequest, "UTF-8"},
		{"NUL in a value", `{"note":"a\u0000b"}`, queue.CodeInvalidRequest, "argument note"},
		{"NUL deep inside", `{"result":{"lines":[{"sku":"\u0000"}]}}`, queue.CodeInvalidRequest, "result.lines[0].sku"},
		{"NUL in a key", `{"a\u0000":1}`, queue.CodeInvalidRequest, "NUL"},
		{"an argument twice", `{"id":"a","id":"b"}`, queue.CodeInvalidRequest, `arguments: duplicate key "id" at /id`},
		{"a key twice inside an argument", `{"result":{"lines":[{"sku":1,"sku":2}]}}`, queue.CodeInvalidRequest, `arguments: duplicate key "sku" at /result/lines/0/sku`},
		{"too large", `{"blob":"` + strings.Repeat("x", defaultMaxBody) + `"}`, queue.CodePayloadTooLarge, "larger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args, err := decodeArguments(json.RawMessage(tc.raw), defaultMaxBody)
			if tc.code == "" {
				if err != nil || args == nil {
					t.Fatalf("got %v, %v", args, err)
				}
				return
			}
			if queue.ErrorCode(err) != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
			if !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("detail %q does not contain %q", err, tc.in)
			}
		})
	}
}

func TestSubmissionSplitsIntentKey(t *testing.T) {
	t.Parallel()
	sb, err := decodeSubmission(json.RawMessage(`{"intent_key":"partner:acme:q3","text":"<b>&","n":1.0}`), defaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if sb.IntentKey != "partner:acme:q3" {
		t.Fatalf("submission %+v", sb)
	}
	if string(sb.Payload) != `{"text":"<b>&","n":1.0}` {
		t.Fatalf("payload %s: want the arguments as written, without intent_key", sb.Payload)
	}
	if sb, err := decodeSubmission(json.RawMessage(`{"intent_key":null,"x":1}`), defaultMaxBody); err != nil || sb.IntentKey != "" {
		t.Fatalf("a null intent_key is no key: %+v %v", sb, err)
	}
}

// The payload is the arguments as the client wrote them: without intent_key
// the very bytes, with it only that member is gone.
func TestSubmissionKeepsArgumentsAsWritten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw, payload, key string
	}{
		{"no key", `{"z":1.50,"a":"\u00e9<&>","m":[1e2,{"y":0,"b":-0.0}]}`, `{"z":1.50,"a":"\u00e9<&>","m":[1e2,{"y":0,"b":-0.0}]}`, ""},
		{"no key, spaced", "{ \"b\" : 1 ,\n \"a\":2 }", "{ \"b\" : 1 ,\n \"a\":2 }", ""},
		{"key first", `{"intent_key":"k:1","z":1.50,"a":2}`, `{"z":1.50,"a":2}`, "k:1"},
		{"key between", `{"z":1.50, "intent_key" : "k:1" ,"a":2}`, `{"z":1.50 ,"a":2}`, "k:1"},
		{"key last", `{"z":1.50,"a":2,"intent_key":"k:1"}`, `{"z":1.50,"a":2}`, "k:1"},
		{"key only", `{ "intent_key":"k:1" }`, `{  }`, "k:1"},
		{"key in a nested object too", `{"intent_key":"k:2","z":1,"a":{"intent_key":"inner"}}`, `{"z":1,"a":{"intent_key":"inner"}}`, "k:2"},
		{"escaped name", `{"b":1,"intent\u005fkey":"k:1"}`, `{"b":1}`, "k:1"},
		{"empty", `{}`, `{}`, ""},
		{"absent", ``, `{}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb, err := decodeSubmission(json.RawMessage(tc.raw), defaultMaxBody)
			if err != nil {
				t.Fatal(err)
			}
			if string(sb.Payload) != tc.payload || sb.IntentKey != tc.key {
				t.Fatalf("payload %s key %q, want %s %q", sb.Payload, sb.IntentKey, tc.payload, tc.key)
			}
		})
	}
	for _, tc := range []struct {
		name, raw string
		code      queue.Code
		in        string
	}{
		{"array", `[1]`, queue.CodeInvalidRequest, "object"},
		{"trailing data", `{"a":1} {}`, queue.CodeInvalidRequest, "object"},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", queue.CodeInvalidRequest, "UTF-8"},
		{"NUL in an argument", `{"a":{"b":"\u0000"}}`, queue.CodeInvalidRequest, "argument a.b"},
		{"NUL in the key", `{"intent_key":"\u0000"}`, queue.CodeInvalidRequest, "argument intent_key"},
		{"key not a string", `{"intent_key":7}`, queue.CodeInvalidRequest, "intent_key must be a string"},
		{"too large", `{"a":"xxxxxxxxxx"}`, queue.CodePayloadTooLarge, "larger than 8 bytes"},
		// docs/getting-started.md, "Security notes": parsers disagree on which copy wins, so neither does.
		{"key twice", `{"intent_key":"k:1","z":1,"intent_key":"k:2"}`, queue.CodeInvalidRequest, `duplicate key "intent_key"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			max := int64(defaultMaxBody)
			if tc.code == queue.CodePayloadTooLarge {
				max = 8
			}
			_, err := decodeSubmission(json.RawMessage(tc.raw), max)
			if queue.ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("got %v, want %s with %q", err, tc.code, tc.in)
			}
		})
	}
}

func TestInputSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		schema string
		keep   []string // top-level keywords that must survive
	}{
		{"none", "", nil},
		{"object", `{"type":"object","required":["a"],"additionalProperties":false,"properties":{"a":{"type":"integer","maximum":10}}}`, []string{"required", "additionalProperties"}},
		{"no type", `{"properties":{"a":{"type":"string"}}}`, nil},
		{"type list", `{"type":["object","null"]}`, nil},
		{"defs", `{"type":"object","$defs":{"x":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/x"}}}`, []string{"$defs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tool := classify.Tool{Name: "t", Class: classify.AtMostOnce, Schema: json.RawMessage(tc.schema)}
			if tc.schema == "" {
				tool.Schema = nil
			}
			s := inputSchema(tool)
			if s["type"] != "object" {
				t.Fatalf("type %v", s["type"])
			}
			props, _ := s["properties"].(map[string]any)
			if props == nil || props[argIntentKey] == nil {
				t.Fatalf("no intent_key property: %v", s)
			}
			for _, k := range tc.keep {
				if s[k] == nil {
					t.Errorf("keyword %s was lost: %v", k, s)
				}
			}
			if _, err := json.Marshal(s); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The property says whether the key is needed.
	for _, tc := range []struct {
		tool classify.Tool
		want string
	}{
		{classify.Tool{Class: classify.ExactlyOnce, Intent: "refund:{order_id}"}, "leave this out"},
		{classify.Tool{Class: classify.AtMostOnce}, "Required for this tool"},
		{classify.Tool{Class: classify.AtLeastOnce}, "informational"},
	} {
		if d := intentKeyDescription(tc.tool); !strings.Contains(d, tc.want) {
			t.Errorf("%s: %q lacks %q", tc.tool.Class, d, tc.want)
		}
	}
}
