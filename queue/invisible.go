package queue

import (
	"bytes"
	"encoding/json"
)

// WarningInvisibleCharacters marks an action whose payload holds a
// bidirectional control or zero-width character: what an approver reads
// on screen may then differ from what is sent (text reordered by U+202E,
// "admin" and "ad\u200bmin" looking alike).
const WarningInvisibleCharacters = "invisible_characters"

// IsInvisible reports whether r is a bidirectional control or a
// zero-width character.
func IsInvisible(r rune) bool {
	switch {
	case r >= 0x202A && r <= 0x202E, // embeddings and overrides
		r >= 0x2066 && r <= 0x2069,            // isolates
		r == 0x200E, r == 0x200F, r == 0x061C, // marks
		r >= 0x200B && r <= 0x200D, // zero-width space, non-joiner, joiner
		r == 0x2060, r == 0xFEFF:   // word joiner, zero-width no-break space
		return true
	}
	return false
}

// HasInvisibleCharacters reports whether any string or key of the JSON
// value raw holds an invisible character (IsInvisible), written as itself
// or as a \u escape. A payload with none of the bytes those characters
// can begin with, and no escape, is answered without decoding: the
// submission path pays one byte scan.
func HasInvisibleCharacters(raw []byte) bool {
	// U+061C is D8 9C in UTF-8, U+200B…U+2069 begin with E2, U+FEFF with EF.
	if bytes.IndexByte(raw, 0xE2) < 0 && bytes.IndexByte(raw, 0xEF) < 0 &&
		bytes.IndexByte(raw, 0xD8) < 0 && !bytes.Contains(raw, []byte(`\u`)) {
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

func hasInvisible(s string) bool {
	for _, r := range s {
		if IsInvisible(r) {
			return true
		}
	}
	return false
}
