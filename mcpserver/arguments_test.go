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
		{"too large", `{"blob":"` + strings.Repeat("x", maxArguments) + `"}`, queue.CodePayloadTooLarge, "larger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args, err := decodeArguments(json.RawMessage(tc.raw))
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
	args, err := decodeArguments(json.RawMessage(`{"intent_key":"partner:acme:q3","text":"<b>&","n":1.0}`))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := submission("post_partner_message", args)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Tool != "post_partner_message" || sb.IntentKey != "partner:acme:q3" {
		t.Fatalf("submission %+v", sb)
	}
	if string(sb.Payload) != `{"n":1.0,"text":"<b>&"}` {
		t.Fatalf("payload %s: want the arguments as written, without intent_key", sb.Payload)
	}
	args, _ = decodeArguments(json.RawMessage(`{"intent_key":null,"x":1}`))
	if sb, err := submission("t", args); err != nil || sb.IntentKey != "" {
		t.Fatalf("a null intent_key is no key: %+v %v", sb, err)
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
