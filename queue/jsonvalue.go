package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/approvals/approvals/payload"
)

// DecodeObject decodes a JSON object keeping numbers as json.Number, so
// intent templates and comparisons see the number as written.
func DecodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	// Exactly one object: not null, nothing after it.
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return m, nil
}

// isJSONObject reports whether raw is exactly one JSON object, as
// DecodeObject would accept it, without building its value.
func isJSONObject(raw []byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(raw)
}

func decodeValue(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// JSONEqual compares two JSON documents as values: key order, white space
// and number spelling (1, 1.0, 1e0) do not matter.
func JSONEqual(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(bytes.TrimSpace(a)) == len(bytes.TrimSpace(b)) || isNull(a) && isNull(b)
	}
	va, ok1 := decodeValue(a)
	vb, ok2 := decodeValue(b)
	return ok1 && ok2 && valueEqual(va, vb)
}

func isNull(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) == 0 || string(t) == "null"
}

func valueEqual(a, b any) bool { return valuesEqual(a, b, payload.NumberEqual) }

// valuesEqual compares two decoded JSON values, numbers by numbersEqual
// (their text differs: equal text is equal).
func valuesEqual(a, b any, numbersEqual func(x, y string) bool) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !valuesEqual(v, w, numbersEqual) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valuesEqual(x[i], y[i], numbersEqual) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		return x == y || numbersEqual(string(x), string(y))
	default:
		return a == b
	}
}

// changedFields lists the top-level fields whose values differ.
func changedFields(before, after map[string]any) []string {
	var out []string
	for k, v := range after {
		if w, ok := before[k]; !ok || !valueEqual(v, w) {
			out = append(out, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}
