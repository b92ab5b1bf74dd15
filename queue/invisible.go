package queue

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
)

// WarningInvisibleCharacters marks an action whose payload holds an
// invisible character (classify.IsInvisible): what an approver reads on screen may
// then differ from what is sent (text reordered by U+202E, "admin" and
// "ad\u200bmin" looking alike, a prompt hidden in tag characters).
const WarningInvisibleCharacters = "invisible_characters"

// HasInvisibleCharacters reports whether any string or key of the JSON
// value raw holds an invisible character (classify.IsInvisible), written as itself
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
			if classify.IsInvisible(r) {
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

func hasInvisible(s string) bool { return strings.ContainsFunc(s, classify.IsInvisible) }
