// Package payload holds the one strict pass over the JSON the server
// accepts from anyone (one value, no duplicate key, numbers and nesting
// within limits) and the rule that compares JSON numbers by value. It knows
// nothing of actions or tools: queue and every face use it.
package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Limits of the JSON the server accepts from anyone (REST bodies, MCP
// arguments, dashboard edits, results). Comparing, validating and showing
// a value within them costs time linear in its size: a number such as
// 1e999999 would make math/big build a million-digit integer, and a
// payload nested thousands deep makes its pretty-printed text quadratic.
const (
	// MaxNumberDigits is the most significant digits a number may have,
	// counted from its first non-zero digit.
	MaxNumberDigits = 100
	// MaxNumberExponent bounds a number's exponent, as written and once
	// the number is normalised (0.001 is 1e-3).
	MaxNumberExponent = 400
	// MaxJSONDepth is the deepest nesting of objects and arrays, counted
	// from the outermost value of the request body.
	MaxJSONDepth = 64
)

// Errors of CheckStrictJSON that refuse JSON which is valid but not
// accepted; any other error is a syntax fault, left to the decoder that
// follows to word.
var (
	// ErrDuplicateKey: an object names one key twice.
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrNumberOutOfRange: a number with more than MaxNumberDigits
	// significant digits or an exponent beyond ±MaxNumberExponent.
	ErrNumberOutOfRange = errors.New("number out of range")
	// ErrTooDeep: objects and arrays nested deeper than MaxJSONDepth.
	ErrTooDeep = errors.New("nested too deep")
)

// StrictRefusal reports whether err, from CheckStrictJSON, refuses valid
// JSON (a duplicate key, a number out of range, too deep a nesting).
func StrictRefusal(err error) bool {
	return errors.Is(err, ErrDuplicateKey) || errors.Is(err, ErrNumberOutOfRange) || errors.Is(err, ErrTooDeep)
}

// CheckStrictJSON is the one pass over JSON the server accepts. It reports
// an error when data is not exactly one JSON value, when any object in it
// names one key twice, when a number is out of range (MaxNumberDigits,
// MaxNumberExponent), or when objects and arrays nest deeper than
// MaxJSONDepth; outer is how deep data itself lies in the request body (0
// when data is the body; 2 for an MCP call's arguments, inside params).
// Errors name where, as a JSON pointer ("/to" or "/items/0/id").
//
// Parsers disagree on which copy of a duplicate wins (encoding/json takes
// the last, many others the first), so a payload with one could show an
// approver one value while the receiver acts on the other.
//
// It streams the input with jsontext and builds no value: one pass over
// the bytes and no allocation per token.
func CheckStrictJSON(data []byte, outer int) error { return checkStrict(data, outer, nil) }

// StrictMembers is CheckStrictJSON of a request body that should be a JSON
// object, in the same one pass: on success it also returns the object's
// members, each name (unescaped) with its value exactly as data writes it
// (sharing data's bytes), as encoding/json would decode the body into a
// map[string]json.RawMessage. For valid JSON that is not an object it
// returns a nil map and no error.
func StrictMembers(data []byte) (map[string]json.RawMessage, error) {
	members := make(map[string]json.RawMessage, 4)
	if err := checkStrict(data, 0, members); err != nil {
		return nil, err
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, nil
	}
	return members, nil
}

// checkStrict is CheckStrictJSON, filling members (when not nil) with the
// members of a top-level object.
func checkStrict(data []byte, outer int, members map[string]json.RawMessage) error {
	// Lone surrogate escapes ("\ud800") and invalid UTF-8 are left to the
	// checks that already refuse what storage cannot hold: this one agrees
	// with encoding/json on everything but what it refuses.
	// A bytes.Buffer is parsed in place, without copying data.
	dec := decoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(noJSON) // holds on to no request's bytes while pooled
		decoders.Put(dec)
	}()
	dec.Reset(bytes.NewBuffer(data), jsontext.AllowInvalidUTF8(true))
	maxDepth := MaxJSONDepth - outer
	var (
		last    jsontext.Value // the string just read: a name, at odd positions of an object
		name    string
		nameEnd int64 = -1 // where the current member's name ends in data
	)
	for {
		switch dec.PeekKind() {
		case '{', '[':
			if _, err := dec.ReadToken(); err != nil {
				return strictJSONError(err)
			}
			if dec.StackDepth() > maxDepth {
				return fmt.Errorf("%w: objects and arrays nest deeper than %d at %s", ErrTooDeep, MaxJSONDepth, pointerText(dec.StackPointer()))
			}
		case '}', ']':
			if _, err := dec.ReadToken(); err != nil {
				return strictJSONError(err)
			}
		case '0':
			v, err := dec.ReadValue()
			if err != nil {
				return strictJSONError(err)
			}
			if why := numberOutOfRange(v); why != "" {
				return fmt.Errorf("%w: the number at %s has %s", ErrNumberOutOfRange, pointerText(dec.StackPointer()), why)
			}
		default:
			// Strings and names (checked for duplicates), literals, and
			// whatever is not JSON, which the read reports.
			v, err := dec.ReadValue()
			if err != nil {
				return strictJSONError(err)
			}
			last = v
		}
		if members != nil && dec.StackDepth() == 1 {
			// Inside the top-level object: a name was just read (an odd
			// count of names and values) or a member's value ended.
			if kind, n := dec.StackIndex(1); kind == '{' && n > 0 {
				if n%2 == 1 {
					name, nameEnd = unquoteName(last), dec.InputOffset()
				} else if nameEnd >= 0 {
					v := bytes.TrimLeft(data[nameEnd:dec.InputOffset()], " \t\r\n:")
					members[name] = json.RawMessage(bytes.TrimRight(v, " \t\r\n"))
					nameEnd = -1
				}
			}
		}
		if dec.StackDepth() == 0 {
			break
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			return errors.New("data after the JSON value")
		}
		return strictJSONError(err)
	}
	return nil
}

// decoders keeps the decoders of checkStrict with what they allocated for
// the names of objects.
var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(noJSON) }}

// noJSON is what a pooled decoder reads: nothing (a pooled decoder is
// never read from).
var noJSON = new(bytes.Buffer)

// unquoteName is the text of a valid JSON string, as encoding/json
// decodes it (a lone surrogate escape becomes U+FFFD).
func unquoteName(v jsontext.Value) string {
	if len(v) >= 2 && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1])
	}
	var name string
	if err := json.Unmarshal(v, &name); err != nil { // cannot happen: the decoder read it as valid
		return string(v)
	}
	return name
}

// numberOutOfRange says why a JSON number (valid syntax) is out of range,
// or "" when it is not: more than MaxNumberDigits significant digits, or an
// exponent beyond ±MaxNumberExponent as written or once normalised.
func numberOutOfRange(v []byte) string {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	digits, first, intLen := 0, -1, 0 // mantissa digits, index of the first non-zero one
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		if first < 0 && v[i] != '0' {
			first = digits
		}
		digits++
	}
	intLen = digits
	if i < len(v) && v[i] == '.' {
		for i++; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
			if first < 0 && v[i] != '0' {
				first = digits
			}
			digits++
		}
	}
	exp := 0
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		neg := false
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			neg = v[i] == '-'
			i++
		}
		for ; i < len(v) && v[i] == '0'; i++ {
		}
		if len(v)-i > 4 { // more than four digits after leading zeros
			return fmt.Sprintf("an exponent beyond ±%d", MaxNumberExponent)
		}
		for ; i < len(v); i++ {
			exp = exp*10 + int(v[i]-'0')
		}
		if neg {
			exp = -exp
		}
	}
	if exp > MaxNumberExponent || exp < -MaxNumberExponent {
		return fmt.Sprintf("an exponent beyond ±%d", MaxNumberExponent)
	}
	if first < 0 {
		return "" // zero
	}
	if digits-first > MaxNumberDigits {
		return fmt.Sprintf("more than %d significant digits", MaxNumberDigits)
	}
	if e := exp + intLen - first - 1; e > MaxNumberExponent || e < -MaxNumberExponent {
		return fmt.Sprintf("an exponent beyond ±%d once normalised (%d)", MaxNumberExponent, e)
	}
	return ""
}

// pointerText is a JSON pointer as errors show it: "/" for the root.
func pointerText(p jsontext.Pointer) string {
	if p == "" {
		return "/"
	}
	return string(p)
}

func strictJSONError(err error) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
		ptr := string(se.JSONPointer)
		key := ptr[strings.LastIndexByte(ptr, '/')+1:]
		key = strings.NewReplacer("~1", "/", "~0", "~").Replace(key)
		if ptr == "" {
			ptr = "/"
		}
		return fmt.Errorf("%w %q at %s: an object may name each key once", ErrDuplicateKey, key, ptr)
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return errors.New("not valid JSON: unexpected end of input")
	}
	return fmt.Errorf("not valid JSON: %w", err)
}
