package queue

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
)

// ReadableJSON is the JSON text s with every \u escape of a character a
// person can read written as the character itself: an agent that sends
// ASCII-only JSON (Python's json.dumps does by default) writes "Grüße" as
// "Gr\u00fc\u00dfe", which nobody can review. The text stays the same JSON
// value. Escapes of what must stay escaped are kept: control characters,
// the quote and the backslash, U+2028 and U+2029 (line breaks to some
// readers), and lone surrogates. Invisible characters (classify.IsInvisible) are
// decoded too, so that a page marks each one where it is; EscapeInvisible
// writes them back as escapes for a text box. Text outside strings, and an
// escape cut short (a truncated document), is copied as it is.
func ReadableJSON(s string) string {
	if !strings.Contains(s, `\u`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	inString := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(s) && s[i+1] == 'u':
			if r, n := decodeEscape(s[i:]); n > 0 {
				b.WriteRune(r)
				i += n
				continue
			}
			b.WriteString(s[i : i+2])
			i += 2
			continue
		case c == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2]) // \" \\ \n …: kept
			i += 2
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// decodeEscape reads the \uXXXX escape (or surrogate pair) at the start of
// s; n is 0 when it is to be kept as written.
func decodeEscape(s string) (r rune, n int) {
	r = hex4(s)
	if r < 0 {
		return 0, 0
	}
	n = 6
	if utf16.IsSurrogate(r) {
		if r >= 0xdc00 || len(s) < 12 {
			return 0, 0 // a lone surrogate: no character
		}
		lo := hex4(s[6:])
		if lo < 0xdc00 || lo > 0xdfff {
			return 0, 0 // a lone surrogate: no character
		}
		r, n = utf16.DecodeRune(r, lo), 12
	}
	if r < 0x20 || r == '"' || r == '\\' || r == 0x7f || r == '\u2028' || r == '\u2029' || !utf8.ValidRune(r) {
		return 0, 0
	}
	return r, n
}

// hex4 is the code unit of "\uXXXX" at the start of s, or -1.
func hex4(s string) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	v, err := strconv.ParseUint(s[2:6], 16, 16)
	if err != nil {
		return -1
	}
	return rune(v)
}

// EscapeInvisible writes each invisible character (classify.IsInvisible) of the
// JSON text s as its \u escape (a surrogate pair beyond U+FFFF): in a text
// box, where nothing can mark it, it is still seen, and the text is the
// same JSON value. Outside strings JSON holds no such character.
func EscapeInvisible(s string) string {
	if !strings.ContainsFunc(s, classify.IsInvisible) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !classify.IsInvisible(r):
			b.WriteRune(r)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
