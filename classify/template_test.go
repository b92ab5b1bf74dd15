package classify

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// decodePayload decodes JSON the way the handlers do: numbers as json.Number.
func decodePayload(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

func TestDeriveKey(t *testing.T) {
	t.Parallel()
	big := "123456789012345678901234567890"
	tests := []struct {
		name    string
		intent  string
		payload string
		want    string
	}{
		{"strings", "email:{customer_id}:{topic}", `{"customer_id":"c-42","topic":"welcome"}`, "email:c-42:welcome"},
		{"string verbatim", "email:{customer_id}", `{"customer_id":"A b/C|d"}`, "email:A b/C|d"},
		{"integer", "refund:{order_id}:{line_id}", `{"order_id":17,"line_id":4}`, "refund:17:4"},
		{"integral fraction", "refund:{order_id}", `{"order_id":17.0}`, "refund:17"},
		{"exponent", "refund:{order_id}", `{"order_id":1.7e1}`, "refund:17"},
		{"negative exponent", "refund:{order_id}", `{"order_id":170e-1}`, "refund:17"},
		{"capital exponent with sign", "refund:{order_id}", `{"order_id":1.7E+1}`, "refund:17"},
		{"big integer", "refund:{order_id}", `{"order_id":` + big + `}`, "refund:" + big},
		{"big integer with exponent", "refund:{order_id}", `{"order_id":1.5e30}`, "refund:15" + strings.Repeat("0", 29)},
		{"negative", "adjust:{delta}", `{"delta":-5.00}`, "adjust:-5"},
		{"zero", "n:{n}", `{"n":0}`, "n:0"},
		{"negative zero", "n:{n}", `{"n":-0.0}`, "n:0"},
		{"nested", "ship:{order.id}:{order.address.zip}", `{"order":{"id":9,"address":{"zip":"10115"}}}`, "ship:9:10115"},
		{"literal braces", "{{x}}:{a}:}}", `{"a":"1"}`, "{x}:1:}"},
		{"dotted name is nested, not literal", "k:{a.b}", `{"a.b":"flat","a":{"b":"nested"}}`, "k:nested"},
		{"extra fields ignored", "k:{a}", `{"a":"1","b":[1,2]}`, "k:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := Tool{Name: "x", Intent: tt.intent}
			got, err := tool.DeriveKey(decodePayload(t, tt.payload))
			if err != nil {
				t.Fatalf("DeriveKey: %v", err)
			}
			if got != tt.want {
				t.Fatalf("DeriveKey = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDeriveKeyGoNumbers(t *testing.T) {
	t.Parallel()
	// Callers that did not decode with UseNumber still get exact integers.
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"float64", float64(17), "17"},
		{"large float64", 1e20, "100000000000000000000"},
		{"int", 17, "17"},
		{"int64", int64(-3), "-3"},
		{"uint64", uint64(18446744073709551615), "18446744073709551615"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := Tool{Intent: "n:{n}"}
			got, err := tool.DeriveKey(map[string]any{"n": tt.value})
			if err != nil || got != "n:"+tt.want {
				t.Fatalf("DeriveKey = %q, %v; want %q", got, err, "n:"+tt.want)
			}
		})
	}
}

func TestDeriveKeyRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		intent  string
		payload map[string]any // nil: use json
		json    string
		field   string
		reason  string // substring of Reason
	}{
		{name: "fraction", intent: "r:{amount}", json: `{"amount":1.5}`, field: "amount", reason: "fraction"},
		{name: "tiny fraction", intent: "r:{amount}", json: `{"amount":17.0000000000000000001}`, field: "amount", reason: "fraction"},
		{name: "float64 fraction", intent: "r:{amount}", payload: map[string]any{"amount": 0.25}, field: "amount", reason: "fraction"},
		{name: "bool", intent: "r:{flag}", json: `{"flag":true}`, field: "flag", reason: "a boolean"},
		{name: "null", intent: "r:{id}", json: `{"id":null}`, field: "id", reason: "null"},
		{name: "object", intent: "r:{id}", json: `{"id":{"a":1}}`, field: "id", reason: "an object"},
		{name: "array", intent: "r:{id}", json: `{"id":[1]}`, field: "id", reason: "an array"},
		{name: "missing", intent: "r:{id}", json: `{}`, field: "id", reason: "missing"},
		{name: "empty string", intent: "r:{id}", json: `{"id":""}`, field: "id", reason: "empty string"},
		{name: "missing nested", intent: "r:{order.line.id}", json: `{"order":{"line":{}}}`, field: "order.line.id", reason: "missing"},
		{name: "through a non-object", intent: "r:{order.id}", json: `{"order":"o-1"}`, field: "order.id", reason: `"order" is a string, not an object`},
		{name: "huge exponent", intent: "r:{n}", json: `{"n":1e999999999}`, field: "n", reason: "too large"},
		{name: "exponent out of range", intent: "r:{n}", json: `{"n":1e99999999999999999999}`, field: "n", reason: "too large"},
		{name: "bad json.Number", intent: "r:{n}", payload: map[string]any{"n": json.Number("12abc")}, field: "n", reason: "not a valid number"},
		{name: "rendered key too long", intent: "r:{id}", json: `{"id":"` + strings.Repeat("x", 300) + `"}`, field: FieldIntentKey, reason: "302 characters long"},
		{name: "rendered key with a newline", intent: "r:{id}", json: `{"id":"a\nb"}`, field: FieldIntentKey, reason: "control character"},
		{name: "rendered key with NUL", intent: "r:{id}", json: `{"id":"a\u0000b"}`, field: FieldIntentKey, reason: "U+0000"},
		{name: "rendered key with a Hangul filler", intent: "r:{id}", json: `{"id":"a\u3164"}`, field: FieldIntentKey, reason: "invisible character (U+3164) at character 4"},
		{name: "rendered key with a tag-range variation selector", intent: "r:{id}", json: `{"id":"\udb40\udd01"}`, field: FieldIntentKey, reason: "invisible character (U+E0101) at character 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			payload := tt.payload
			if payload == nil {
				payload = decodePayload(t, tt.json)
			}
			tool := Tool{Name: "x", Intent: tt.intent}
			key, err := tool.DeriveKey(payload)
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("DeriveKey = %q, %v; want a *PayloadError", key, err)
			}
			if pe.Field != tt.field || !strings.Contains(pe.Reason, tt.reason) {
				t.Fatalf("PayloadError{Field: %q, Reason: %q}, want field %q and a reason containing %q", pe.Field, pe.Reason, tt.field, tt.reason)
			}
			if key != "" {
				t.Fatalf("key = %q alongside an error", key)
			}
			// The key rules' own error is kept, so that a face can tell an
			// invisible character (invalid_request) from the other rules.
			var invisible *InvisibleKeyError
			if got, want := errors.As(err, &invisible), strings.Contains(tt.reason, "invisible"); got != want {
				t.Fatalf("errors.As(%v, *InvisibleKeyError) = %v, want %v", err, got, want)
			}
		})
	}
}

func TestDeriveKeyWithoutTemplate(t *testing.T) {
	t.Parallel()
	tool := Tool{Name: "x"}
	if key, err := tool.DeriveKey(map[string]any{"id": 1}); key != "" || err != nil {
		t.Fatalf("DeriveKey = %q, %v; want \"\", nil", key, err)
	}
}

func TestPayloadErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  PayloadError
		want string
	}{
		{PayloadError{Field: "customer_id", Reason: "missing"}, `payload field "customer_id": missing`},
		{PayloadError{Reason: "got array, want object"}, `payload: got array, want object`},
		{PayloadError{Field: FieldIntentKey, Reason: "too long"}, `intent key: too long`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestRenderPreview(t *testing.T) {
	t.Parallel()
	tool := Tool{Preview: map[string]string{
		"title":   "{subject}",
		"to":      "To: {to.name} <{to.email}>",
		"amount":  "{amount} {currency}",
		"missing": "[{nope}]",
		"flags":   "{urgent}/{tags}/{meta}/{nothing}",
		"braces":  "{{literal}}",
		"big":     "{big}",
	}}
	payload := decodePayload(t, `{
		"subject": "Hello <world> & co",
		"to": {"name": "Ada", "email": "ada@example.com"},
		"amount": 12.50, "currency": "EUR",
		"urgent": true, "tags": ["a", "b"], "meta": {"z": 1, "a": "x"}, "nothing": null,
		"big": 1e400
	}`)
	want := map[string]string{
		"title":   "Hello <world> & co",
		"to":      "To: Ada <ada@example.com>",
		"amount":  "12.50 EUR",
		"missing": "[]",
		"flags":   `true/["a","b"]/{"a":"x","z":1}/null`,
		"braces":  "{literal}",
		"big":     "1e400",
	}
	got := tool.RenderPreview(payload)
	if len(got) != len(want) {
		t.Fatalf("RenderPreview = %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("preview %q = %q, want %q", k, got[k], w)
		}
	}
	if (&Tool{}).RenderPreview(payload) != nil {
		t.Error("RenderPreview without templates: want nil")
	}
}

// PreviewHides names what no placeholder shows, as the largest hidden parts.
func TestPreviewHides(t *testing.T) {
	t.Parallel()
	tool := Tool{Preview: map[string]string{"title": "{subject}", "to": "{to.email} ({to.name})", "body": "{body}", "meta": "{meta}"}}
	payload := map[string]any{
		"subject": "s", "body": "b", "meta": map[string]any{"a": 1.0},
		"to":          map[string]any{"email": "e", "name": "n", "cc": "hidden@example.com"},
		"customer_id": "c1", "lines": []any{1.0},
	}
	got := tool.PreviewHides(payload)
	want := []string{"customer_id", "lines", "to.cc"}
	if !slices.Equal(got, want) {
		t.Fatalf("PreviewHides = %v, want %v", got, want)
	}
	if got := (&Tool{}).PreviewHides(map[string]any{"a": 1.0, "b": 2.0}); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("no preview: %v, want every field", got)
	}
	if got := tool.PreviewHides(map[string]any{"subject": "s"}); len(got) != 0 {
		t.Fatalf("everything shown: %v", got)
	}
}
