package queue_test

import (
	"testing"

	"github.com/approvals/approvals/queue"
)

func TestHasInvisibleCharacters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, payload string
		want          bool
	}{
		{"plain", `{"to":"a@example.com","body":"Hello"}`, false},
		{"other non-ASCII", `{"body":"Grüße — “quoted” €5 ٣"}`, false},
		{"escaped ordinary character", `{"body":"caf\u00e9"}`, false},
		{"right-to-left override", "{\"body\":\"pay \u202egnp.exe\"}", true},
		{"isolate", "{\"body\":\"a\u2067b\"}", true},
		{"left-to-right mark", "{\"body\":\"a\u200eb\"}", true},
		{"arabic letter mark", "{\"body\":\"a\u061cb\"}", true},
		{"zero-width space", "{\"user\":\"ad\u200bmin\"}", true},
		{"zero-width joiner", "{\"user\":\"a\u200db\"}", true},
		{"word joiner", "{\"user\":\"a\u2060b\"}", true},
		{"byte order mark", "{\"user\":\"\ufeffadmin\"}", true},
		{"escaped override", `{"body":"pay \u202Egnp.exe"}`, true},
		{"in a nested array", "{\"items\":[{\"name\":\"x\u200by\"}]}", true},
		{"in a key", "{\"na\u200bme\":1}", true},
		{"escape of a backslash, no character", `{"body":"C:\\u202e"}`, false},
		// Default_Ignorable_Code_Point and Cf beyond the controls above.
		{"tag characters", "{\"body\":\"hi\U000E0041\U000E0042\U000E007F\"}", true},
		{"tag character escaped as a surrogate pair", `{"body":"hi\udb40\udc41"}`, true},
		{"soft hyphen", "{\"user\":\"ad\u00admin\"}", true},
		{"invisible operators", "{\"n\":\"2\u20621\"}", true},
		{"mongolian vowel separator", "{\"s\":\"a\u180eb\"}", true},
		{"hangul filler", "{\"s\":\"\u3164\"}", true},
		{"halfwidth hangul filler", "{\"s\":\"\uffa0\"}", true},
		{"variation selector", "{\"s\":\"a\ufe0f\"}", true},
		{"variation selector supplement", "{\"s\":\"a\U000E0100\"}", true},
		{"combining grapheme joiner", "{\"s\":\"a\u034fb\"}", true},
		{"arabic number sign (Cf)", "{\"s\":\"\u0600\"}", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := queue.HasInvisibleCharacters([]byte(tt.payload)); got != tt.want {
				t.Fatalf("HasInvisibleCharacters(%s) = %v, want %v", tt.payload, got, tt.want)
			}
		})
	}
}
