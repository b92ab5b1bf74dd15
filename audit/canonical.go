package audit

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonical returns the canonical form of one JSON text: RFC 8785 (JCS)
// with numbers kept exactly as written (doc.go says why and how).
func Canonical(text []byte) ([]byte, error) {
	return appendCanonical(make([]byte, 0, len(text)), text)
}

// appendCanonical appends the canonical form of text to out. On an error
// it returns nil; out's own bytes are untouched.
func appendCanonical(out, text []byte) ([]byte, error) {
	p := parser{s: text}
	p.space()
	out, err := p.value(out, 0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.fail("text after the value")
	}
	return out, nil
}

// appendCanonicalOrString appends Canonical(text) to out, or for a text
// that is not JSON (which no store admits) the canonical JSON string of
// that text, so that sealing never stops at one bad row and the verifier
// reaches the same bytes.
func appendCanonicalOrString(out, text []byte) []byte {
	if res, err := appendCanonical(out, text); err == nil {
		return res
	}
	return appendString(out, string(text))
}

// maxDepth bounds nesting; the service refuses deeper than 64 at its edge.
const maxDepth = 512

type parser struct {
	s []byte
	i int
}

func (p *parser) fail(what string) error {
	return fmt.Errorf("canonical JSON: %s at offset %d", what, p.i)
}

func (p *parser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(out []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.fail("nesting deeper than 512")
	}
	if p.i >= len(p.s) {
		return nil, p.fail("unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(out, depth)
	case c == '[':
		return p.array(out, depth)
	case c == '"':
		start := p.i
		if _, ok := p.plainStr(); ok {
			return append(out, p.s[start:p.i]...), nil
		}
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendString(out, string(s)), nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number(out)
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(p.s)-p.i >= len(lit) && string(p.s[p.i:p.i+len(lit)]) == lit {
				p.i += len(lit)
				return append(out, lit...), nil
			}
		}
		return nil, p.fail("unexpected character")
	}
}

// member is one member of an object being written: its name, and where
// its `"name":value` stands in the output.
type member struct {
	key      []byte
	from, to int
}

// object writes the members as they come, each canonical, and reorders
// them afterwards only when their names were not already in order (most
// often they are, or the object is small).
func (p *parser) object(out []byte, depth int) ([]byte, error) {
	p.i++ // {
	start := len(out)
	out = append(out, '{')
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return append(out, '}'), nil
	}
	var stack [16]member
	members, sorted := stack[:0], true
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.fail("expected a member name")
		}
		if len(members) > 0 {
			out = append(out, ',')
		}
		from, keyStart := len(out), p.i
		key, plain := p.plainStr()
		if plain {
			out = append(out, p.s[keyStart:p.i]...)
		} else {
			var err error
			if key, err = p.str(); err != nil {
				return nil, err
			}
			out = appendString(out, string(key))
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.fail("expected ':'")
		}
		p.i++
		p.space()
		out = append(out, ':')
		var err error
		if out, err = p.value(out, depth+1); err != nil {
			return nil, err
		}
		if n := len(members); n > 0 && compareUTF16(members[n-1].key, key) > 0 {
			sorted = false
		}
		members = append(members, member{key, from, len(out)})
		p.space()
		if p.i >= len(p.s) {
			return nil, p.fail("unexpected end in an object")
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] != '}' {
			return nil, p.fail("expected ',' or '}'")
		}
		p.i++
		break
	}
	if !sorted {
		// Stable: members of one name (which the service refuses at its
		// edge) keep their order, so no two different texts share a form.
		slices.SortStableFunc(members, func(a, b member) int { return compareUTF16(a.key, b.key) })
		written := slices.Clone(out[start:])
		out = out[:start+1]
		for i, m := range members {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, written[m.from-start:m.to-start]...)
		}
	}
	return append(out, '}'), nil
}

func (p *parser) array(out []byte, depth int) ([]byte, error) {
	p.i++ // [
	out = append(out, '[')
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return append(out, ']'), nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			out = append(out, ',')
		}
		p.space()
		var err error
		if out, err = p.value(out, depth+1); err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.s) {
			return nil, p.fail("unexpected end in an array")
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] != ']' {
			return nil, p.fail("expected ',' or ']'")
		}
		p.i++
		return append(out, ']'), nil
	}
}

// number copies a number as written, after checking RFC 8259's grammar.
func (p *parser) number(out []byte) ([]byte, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case digits() == 0:
		return nil, p.fail("malformed number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.fail("malformed number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.fail("malformed number")
		}
	}
	return append(out, p.s[start:p.i]...), nil
}

// plainStr reads a string that holds no escape and only UTF-8, whose
// value is then the very bytes between its quotes: it returns them (a
// slice of the input) and true. For any other string it leaves p.i where
// it was and returns false: str reads it.
func (p *parser) plainStr() ([]byte, bool) {
	for i := p.i + 1; i < len(p.s); {
		switch c := p.s[i]; {
		case c == '"':
			v := p.s[p.i+1 : i]
			p.i = i + 1
			return v, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(p.s[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false
			}
			i += size
		}
	}
	return nil, false
}

// str reads a string and returns its value. Bytes that are not UTF-8, and
// escaped surrogates that do not pair, become U+FFFD, as encoding/json
// decodes them.
func (p *parser) str() ([]byte, error) {
	p.i++ // "
	var b []byte
	for {
		if p.i >= len(p.s) {
			return nil, p.fail("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b, nil
		case c < 0x20:
			return nil, p.fail("control character in a string")
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return nil, err
			}
			b = utf8.AppendRune(b, r)
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.s[p.i:])
			b = utf8.AppendRune(b, r) // RuneError for a bad byte
			p.i += size
		}
	}
}

func (p *parser) escape() (rune, error) {
	if p.i+1 >= len(p.s) {
		return 0, p.fail("unterminated escape")
	}
	c := p.s[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if utf16.IsSurrogate(r) {
			if p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
				save := p.i
				p.i += 2
				r2, err := p.hex4()
				if err != nil {
					return 0, err
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return d, nil
				}
				p.i = save // not a pair: the second escape stands alone
			}
			return utf8.RuneError, nil
		}
		return r, nil
	}
	return 0, p.fail("unknown escape")
}

func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.s) {
		return 0, p.fail("short \\u escape")
	}
	n, err := strconv.ParseUint(string(p.s[p.i:p.i+4]), 16, 16)
	if err != nil {
		return 0, p.fail("malformed \\u escape")
	}
	p.i += 4
	return rune(n), nil
}

// appendString writes s as RFC 8785 does (ECMAScript's JSON.stringify):
// quote, backslash and control characters escaped, the short escapes where
// they exist, every other character as itself in UTF-8 (a byte that is not
// UTF-8 as U+FFFD). Runs that need no escape are copied whole.
func appendString(out []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	done := 0 // s[:done] is written
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				out = append(out, s[done:i]...)
				out = append(out, "\uFFFD"...)
				done = i + 1
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		out = append(out, s[done:i]...)
		switch c {
		case '"':
			out = append(out, '\\', '"')
		case '\\':
			out = append(out, '\\', '\\')
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		done = i
	}
	out = append(out, s[done:]...)
	return append(out, '"')
}

// compareUTF16 orders member names by their UTF-16 code units, as RFC 8785
// sorts them. That is byte order (of UTF-8) except past U+FFFF against
// U+E000-U+FFFF, so only the first runes that differ are decoded.
func compareUTF16(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return cmp.Compare(len(a), len(b))
	}
	for i > 0 && !utf8.RuneStart(a[i]) { // the same rune start in both
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	ua, ub := units(ra), units(rb)
	for j := 0; j < len(ua) && j < len(ub); j++ {
		if ua[j] != ub[j] {
			return cmp.Compare(ua[j], ub[j])
		}
	}
	return cmp.Compare(len(ua), len(ub))
}

func units(r rune) []uint16 {
	if r >= 0x10000 {
		r1, r2 := utf16.EncodeRune(r)
		return []uint16{uint16(r1), uint16(r2)}
	}
	return []uint16{uint16(r)}
}
