package queue

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// ErrDuplicateKey is wrapped by CheckNoDuplicateKeys when an object names
// one key twice.
var ErrDuplicateKey = errors.New("duplicate key")

// CheckNoDuplicateKeys reports an error when data is not exactly one JSON
// value or when any object in it names one key twice. Parsers disagree on
// which copy of a duplicate wins (encoding/json takes the last, many
// others the first), so a payload with one could show an approver one
// value while the receiver acts on the other. The error names the key and
// where it is, as a JSON pointer ("/to" or "/items/0/id").
//
// It streams the input with jsontext and builds no value, so it costs one
// extra pass over the bytes and no allocation per key.
func CheckNoDuplicateKeys(data []byte) error {
	// Lone surrogate escapes ("\ud800") and invalid UTF-8 are left to the
	// checks that already refuse what storage cannot hold: this one agrees
	// with encoding/json on everything but duplicates.
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true))
	if err := dec.SkipValue(); err != nil {
		return strictJSONError(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			return errors.New("data after the JSON value")
		}
		return strictJSONError(err)
	}
	return nil
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
