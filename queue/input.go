package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/payload"
)

// The checks every face (REST, dashboard, MCP) applies to its input once it
// has decoded it its own way: what JSON storage can hold, and the intent
// key.

// StorableJSON is the one check of JSON that will be stored: a payload, a
// result, an edited payload, a tool call's arguments. raw must be valid
// UTF-8, one JSON value with nothing after it, within the limits of
// payload.CheckStrictJSON (no duplicate key, no number out of range, nesting at most
// payload.MaxJSONDepth), and hold no NUL character in any string or key
// (PostgreSQL's jsonb cannot store U+0000); when object
// is set it must be a JSON object. It returns the value decoded as the API
// reads JSON everywhere (numbers as json.Number, so 1e400 is valid).
//
// Errors are invalid_request naming what is wrong, with what naming the
// document and the path of a NUL below it ("payload.a[0].b"; with what ""
// the path alone). shapeCode is the code when raw is not JSON or not an
// object: invalid_request for a request, invalid_payload for an edit an
// approver typed.
func StorableJSON(raw []byte, what string, object bool, shapeCode Code) (any, error) {
	if !utf8.Valid(raw) {
		return nil, Errorf(CodeInvalidRequest, "%s is not valid UTF-8", what)
	}
	v, err := DecodeJSON(raw)
	if err != nil {
		return nil, Errorf(shapeCode, "%s is not valid JSON: %s", what, err)
	}
	if _, ok := v.(map[string]any); object && !ok {
		return nil, Errorf(shapeCode, "%s must be a JSON object", what)
	}
	// Parsers disagree on which copy of a repeated key wins, so an approver
	// could read one value and a receiver act on the other; and a number
	// out of range or too deep a nesting makes comparing and showing the
	// value cost more than its size.
	if err := payload.CheckStrictJSON(raw, 0); payload.StrictRefusal(err) {
		return nil, Errorf(CodeInvalidRequest, "%s: %v", what, err)
	}
	if err := RefuseNUL(v, what); err != nil {
		return nil, err
	}
	return v, nil
}

// RefuseNUL is the NUL part of StorableJSON, for a value decoded (and
// checked for duplicate keys) already: an invalid_request naming the path
// below what of the first string or key holding U+0000, which PostgreSQL's
// jsonb cannot store.
func RefuseNUL(v any, what string) error {
	if path, ok := findNUL(v, what); ok {
		return Errorf(CodeInvalidRequest, "%s contains a NUL character", path)
	}
	return nil
}

// DecodeIntentKey reads a supplied intent key from the JSON value that
// carries it (the intent_key member of a REST body, the intent_key argument
// of an MCP call), valid JSON as a decoded member is. Absent (nil) or null
// is no key, ""; anything but a string, or a string that breaks the key
// rules, is invalid_request naming intent_key.
func DecodeIntentKey(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var key string
	// A string without escapes is its own text: the common case, undecoded.
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		key = string(raw[1 : len(raw)-1])
	} else if err := json.Unmarshal(raw, &key); err != nil {
		return "", Errorf(CodeInvalidRequest, "intent_key must be a string")
	}
	if err := ValidIntentKey(key, "intent_key"); err != nil {
		return "", err
	}
	return key, nil
}

// ValidIntentKey checks a supplied key against the key rules
// (classify.ValidateKey: 1-255 printable characters, none invisible); the invalid_request
// names what carried it ("intent_key", "Idempotency-Key header").
func ValidIntentKey(key, what string) error {
	if err := classify.ValidateKey(key); err != nil {
		return Errorf(CodeInvalidRequest, "%s: %v", what, err)
	}
	return nil
}

// DecodeJSON decodes the one JSON value raw holds: numbers as json.Number
// and nothing after the value. The error says what is wrong, for a detail.
func DecodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New(JSONErrorText(err))
	}
	if dec.More() || len(bytes.TrimSpace(raw[dec.InputOffset():])) != 0 {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// JSONErrorText words a JSON decoding error for a problem detail: where the
// syntax breaks, or that the input ended early.
func JSONErrorText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return err.Error()
}

// findNUL reports the path of the first string or key holding U+0000.
func findNUL(v any, path string) (string, bool) {
	name := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case string:
		return path, strings.IndexByte(x, 0) >= 0
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 {
				return name("(a key)"), true
			}
			if p, ok := findNUL(e, name(k)); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range x {
			if p, ok := findNUL(e, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}
