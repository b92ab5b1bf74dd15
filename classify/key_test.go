package classify

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		want string // error substring; "" means valid
	}{
		{"simple", "refund:123:4", ""},
		{"one character", "x", ""},
		{"255 characters", strings.Repeat("k", 255), ""},
		{"255 multibyte characters", strings.Repeat("é", 255), ""},
		{"spaces and unicode", "email:Zoë Müller:welcome", ""},
		{"empty", "", "empty"},
		{"256 characters", strings.Repeat("k", 256), "256 characters long; the limit is 255"},
		{"NUL", "a\x00b", "control character (U+0000) at character 2"},
		{"newline", "a\nb", "control character (U+000A)"},
		{"tab", "\tkey", "control character (U+0009) at character 1"},
		{"DEL", "key\x7f", "control character (U+007F)"},
		{"no-break space", "a\u00a0b", "non-printable character (U+00A0)"},
		{"zero-width space", "a\u200bb", "invisible character (U+200B) at character 2"},
		// Invisible characters that unicode.IsPrint takes for printable
		// letters and marks: refused as the format characters are.
		{"hangul filler", "refund:\u3164", "invisible character (U+3164) at character 8"},
		{"hangul choseong filler", "\u115f:1", "invisible character (U+115F) at character 1"},
		{"combining grapheme joiner", "a\u034fb", "invisible character (U+034F) at character 2"},
		{"variation selector supplement", "ab\U000E0101", "invisible character (U+E0101) at character 3"},
		{"right-to-left override", "pay:\u202egnp", "invisible character (U+202E) at character 5"},
		{"byte order mark", "\ufeffkey", "invisible character (U+FEFF) at character 1"},
		{"tag character", "k\U000E0041", "invisible character (U+E0041) at character 2"},
		{"soft hyphen", "ad\u00admin", "invisible character (U+00AD) at character 3"},
		{"variation selector 16", "heart:\u2764\ufe0f", "invisible character (U+FE0F) at character 8"},
		{"visible non-ASCII", "email:Zoë:\u2764", ""},
		{"invalid UTF-8", "a\xffb", "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateKey(tt.key)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateKey: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ValidateKey error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestLooksRandom(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want bool
	}{
		{"refund:123:4", false},
		{"email:42:welcome", false},
		{"post:news:launch-2024", false},
		{"report:2024-05-01", false},         // a date is a business fact
		{"order:1234567890123456789", false}, // long all-digit ids are order numbers
		{"sms:5551234567:welcome", false},    // 10 digits, but not a plausible unix time
		{"cache:deadbeef", false},            // 8 hex characters
		{"req-1700000000", false},            // the digits are not a whole segment
		{"refund:550e8400-e29b-41d4-a716-446655440000", true},
		{"req-550E8400-E29B-41D4-A716-446655440000", true}, // a UUID anywhere
		{"refund:550e8400e29b41d4a716446655440000", true},  // a UUID without dashes
		{"cache:3f786850e387550fdab836ed7e6dc881de23001b", true},
		{"job:01ARZ3NDEKTSV4RRFFQ69G5FAV", true},     // ULID
		{"job:req_01arz3ndektsv4rrffq69g5fav", true}, // ULID as a token of a segment
		{"req:1700000000", true},                     // unix seconds
		{"req/1700000000000", true},                  // unix milliseconds
		{"a|1700000000|b", true},
		{"email:42:2024-05-01T12:00:00Z", true}, // RFC 3339
		{"email:42:2024-05-01T12:00:00.123+02:00", true},
		{"x:0123456789abcdef", true},           // 16 hex characters at the end
		{"0123456789ABCDEF:x", true},           // at the start
		{"x:0123456789abcde:y", false},         // 15
		{"x:0123456789012345:y", false},        // 16 digits, no letter
		{"x:01ARZ3NDEKTSV4RRFFQ69G5FAſ", true}, // ſ folds to s: 26 characters, 27 bytes
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			if got := LooksRandom(tt.key); got != tt.want {
				t.Fatalf("LooksRandom(%q) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

// TestHexRunMatchesTheRegexp: the byte scan that replaced the regular
// expression [0-9a-fA-F]{16,} finds a run with a hex letter in exactly the
// same strings.
func TestHexRunMatchesTheRegexp(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`[0-9a-fA-F]{16,}`)
	want := func(s string) bool {
		for _, run := range re.FindAllString(s, -1) {
			if strings.ContainsAny(run, "abcdefABCDEF") {
				return true
			}
		}
		return false
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "0123456789abcdefABCDEFxyz:-_é"
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		if got := hasHexRunWithLetter(s, 16); got != want(s) {
			t.Fatalf("hasHexRunWithLetter(%q) = %v, the regexp says %v", s, got, want(s))
		}
	}
}
