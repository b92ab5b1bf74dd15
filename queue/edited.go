package queue

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// EditedFields lists, as RFC 6901 JSON pointers, where the approved payload
// differs from the payload as submitted; nil when it was not edited (not
// approved yet, or approved as submitted). See EditedPointers for the rules.
func (a *Action) EditedFields() []string {
	if len(a.ApprovedPayload) == 0 || bytes.Equal(a.ApprovedPayload, a.Payload) {
		return nil
	}
	return EditedPointers(a.Payload, a.ApprovedPayload)
}

// EditedPointers compares two JSON documents as values (key order, white
// space and number spelling do not matter) and returns the RFC 6901
// pointers of what differs, in document order (object keys sorted, array
// elements by index); nil when the two are equal or either is not JSON.
//
// Objects recurse to their leaves: a key added or removed is reported
// itself ("/cc"), not every leaf under it. Arrays of the same length recurse
// per index ("/items/2/qty"); arrays whose length changed are reported
// whole ("/items"), because an insertion would shift every later index and
// report them all as edited. A value whose type changed is reported whole.
// The root pointer "" means the documents differ in type.
func EditedPointers(before, after []byte) []string {
	b, ok1 := decodeValue(before)
	a, ok2 := decodeValue(after)
	if !ok1 || !ok2 {
		return nil
	}
	var out []string
	diffValues(b, a, "", &out)
	return out
}

func diffValues(b, a any, at string, out *[]string) {
	switch x := b.(type) {
	case map[string]any:
		y, ok := a.(map[string]any)
		if !ok {
			*out = append(*out, at)
			return
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, dup := x[k]; !dup {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, inB := x[k]
			w, inA := y[k]
			p := at + "/" + EscapePointerToken(k)
			if !inB || !inA {
				*out = append(*out, p)
				continue
			}
			diffValues(v, w, p, out)
		}
	case []any:
		y, ok := a.([]any)
		if !ok || len(x) != len(y) {
			if !ok || !valueEqual(x, y) {
				*out = append(*out, at)
			}
			return
		}
		for i := range x {
			diffValues(x[i], y[i], at+"/"+strconv.Itoa(i), out)
		}
	default:
		if !valueEqual(b, a) {
			*out = append(*out, at)
		}
	}
}

// pointerEscaper escapes a reference token: "~" first as "~0", then "/"
// as "~1" (RFC 6901 section 3); one pass of a Replacer does both at once.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// EscapePointerToken escapes one key for use in a JSON pointer.
func EscapePointerToken(s string) string { return pointerEscaper.Replace(s) }

// PointerValue resolves an RFC 6901 pointer in a JSON document, returning
// the value as compact JSON and whether it exists: the diff view shows the
// old and the new value of each edited field. To resolve many pointers in
// one document, decode it once and use ResolvePointer.
func PointerValue(doc []byte, pointer string) (json.RawMessage, bool) {
	v, ok := decodeValue(doc)
	if !ok {
		return nil, false
	}
	if v, ok = ResolvePointer(v, pointer); !ok {
		return nil, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return b, true
}

// DecodeValue decodes one JSON document as the comparisons read it
// (numbers as json.Number), for ResolvePointer.
func DecodeValue(doc []byte) (any, bool) { return decodeValue(doc) }

// ResolvePointer resolves an RFC 6901 pointer in a decoded JSON value.
func ResolvePointer(v any, pointer string) (any, bool) {
	if pointer == "" {
		return v, true
	}
	if pointer[0] != '/' {
		return nil, false
	}
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || strconv.Itoa(i) != tok {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// MarshalJSON writes the stored fields and the derived edited_fields, so
// every face that encodes an action with encoding/json (MCP's
// structuredContent, listings) shows it; the REST API's own encoder writes
// the same bytes.
func (a Action) MarshalJSON() ([]byte, error) {
	type plain Action // drops this method, so the struct is encoded field by field
	return json.Marshal(struct {
		plain
		EditedFields []string `json:"edited_fields"`
	}{plain(a), a.EditedFields()})
}
