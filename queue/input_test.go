package queue_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/approvals/approvals/queue"
)

// TestDecodeIntentKey: the one intent-key check of the REST body and the MCP
// arguments, with the details docs/api.md promises.
func TestDecodeIntentKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw, key, err string // err: "" for success, else a part of the detail
	}{
		{"absent", "", "", ""},
		{"null", " null ", "", ""},
		{"plain", `"refund:o-1:1"`, "refund:o-1:1", ""},
		{"escaped", `"email:\u00e9:\"x\""`, `email:é:"x"`, ""},
		{"number", `5`, "", "intent_key must be a string"},
		{"object", `{"k":1}`, "", "intent_key must be a string"},
		{"empty", `""`, "", "intent_key: intent key is empty"},
		{"too long", `"` + strings.Repeat("a", 256) + `"`, "", "intent_key: intent key is 256 characters long"},
		{"newline", `"a\nb"`, "", "intent_key: intent key contains a control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key, err := queue.DecodeIntentKey(json.RawMessage(tc.raw))
			if tc.err == "" {
				if err != nil || key != tc.key {
					t.Fatalf("got %q, %v; want %q", key, err, tc.key)
				}
				return
			}
			if queue.ErrorCode(err) != queue.CodeInvalidRequest || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %q, %v; want invalid_request containing %q", key, err, tc.err)
			}
		})
	}
	if err := queue.ValidIntentKey("a\tb", "Idempotency-Key header"); queue.ErrorCode(err) != queue.CodeInvalidRequest ||
		!strings.Contains(err.Error(), "Idempotency-Key header: intent key contains a control character") {
		t.Fatalf("ValidIntentKey: %v", err)
	}
}
