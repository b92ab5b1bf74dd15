package queue

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

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
func CheckStrictJSON(data []byte, outer int) error {
	// Lone surrogate escapes ("\ud800") and invalid UTF-8 are left to the
	// checks that already refuse what storage cannot hold: this one agrees
	// with encoding/json on everything but what it refuses.
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true))
	maxDepth := MaxJSONDepth - outer
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
			if _, err := dec.ReadValue(); err != nil {
				return strictJSONError(err)
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
