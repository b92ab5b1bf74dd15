package queue

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// WarningInvisibleCharacters marks an action whose payload holds an
// invisible character (IsInvisible): what an approver reads on screen may
// then differ from what is sent (text reordered by U+202E, "admin" and
// "ad\u200bmin" looking alike, a prompt hidden in tag characters).
const WarningInvisibleCharacters = "invisible_characters"

//go:generate go run invisible_gen.go /usr/share/unicode/DerivedCoreProperties.txt

// IsInvisible reports whether r is a character that is not drawn: one of
// Unicode's Default_Ignorable_Code_Point (invisible_table.go, from the
// Unicode Character Database 15.0.0, Go's own Unicode version) or of the
// format category Cf. That takes in the bidirectional controls, zero-width
// characters, soft hyphen, invisible operators, Hangul fillers, variation
// selectors and the tag characters U+E0000-E007F ("ASCII smuggling").
func IsInvisible(r rune) bool {
	return r >= 0x80 && (unicode.Is(defaultIgnorable, r) || unicode.Is(unicode.Cf, r))
}

// HasInvisibleCharacters reports whether any string or key of the JSON
// value raw holds an invisible character (IsInvisible), written as itself
// or as a \u escape. Outside strings JSON is ASCII, so without an escape
// the text is read as it is, rune by rune, with no decoding and no
// allocation: the submission path pays one scan.
func HasInvisibleCharacters(raw []byte) bool {
	if !bytes.Contains(raw, []byte(`\u`)) {
		for i := 0; i < len(raw); {
			if raw[i] < utf8.RuneSelf {
				i++
				continue
			}
			r, n := utf8.DecodeRune(raw[i:])
			if IsInvisible(r) {
				return true
			}
			i += n
		}
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok && hasInvisible(s) {
			return true
		}
	}
}

func hasInvisible(s string) bool { return strings.ContainsFunc(s, IsInvisible) }
