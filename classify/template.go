package classify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// PayloadError says which payload field is wrong and why. Field is a dotted path ("a.b.c",
// array elements by index: "lines.0.sku"), "" for the payload as a whole, or FieldIntentKey
// when the rendered intent key breaks the key rules.
type PayloadError struct {
	Field  string
	Reason string
	// Err is the key rules' error when Field is FieldIntentKey (an *InvisibleKeyError among
	// them), nil otherwise.
	Err error
}

// Unwrap is the key rules' error, for errors.As.
func (e *PayloadError) Unwrap() error { return e.Err }

func (e *PayloadError) Error() string {
	switch e.Field {
	case "":
		return "payload: " + e.Reason
	case FieldIntentKey:
		return "intent key: " + e.Reason
	}
	return fmt.Sprintf("payload field %q: %s", e.Field, e.Reason)
}

// A template is literal text with {field} or {a.b.c} placeholders; "{{" and "}}" are
// literal braces.
type template []templatePart

type templatePart struct {
	literal string   // used when path is nil
	field   string   // the placeholder as written, e.g. "a.b"
	path    []string // field split on '.'
}

// parsedTemplates caches parseTemplate per text: intent keys are derived
// on every submission and previews rendered for every row of the queue.
// Like compiledSchemas, it is bounded by the tools files the process read.
var parsedTemplates sync.Map // string -> parsedTemplate

type parsedTemplate struct {
	t   template
	err error
}

// parseTemplate returns the parsed template; callers must not modify it.
func parseTemplate(s string) (template, error) {
	if v, ok := parsedTemplates.Load(s); ok {
		p := v.(parsedTemplate)
		return p.t, p.err
	}
	t, err := doParseTemplate(s)
	parsedTemplates.Store(s, parsedTemplate{t, err})
	return t, err
}

func doParseTemplate(s string) (template, error) {
	var (
		parts []templatePart
		lit   strings.Builder
	)
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, templatePart{literal: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				lit.WriteByte('{')
				i++
				continue
			}
			end := strings.IndexAny(s[i+1:], "{}")
			if end < 0 || s[i+1+end] == '{' {
				return nil, fmt.Errorf("unclosed \"{\" at offset %d (write \"{{\" for a literal brace)", i)
			}
			field := s[i+1 : i+1+end]
			if field == "" {
				return nil, fmt.Errorf("empty field name \"{}\" at offset %d", i)
			}
			path := strings.Split(field, ".")
			for _, p := range path {
				if p == "" {
					return nil, fmt.Errorf("field name %q at offset %d has an empty part (dots separate nested fields)", field, i)
				}
				if strings.TrimSpace(p) != p {
					return nil, fmt.Errorf("field name %q at offset %d has spaces around a name; write {order_id}, not { order_id }", field, i)
				}
			}
			flush()
			parts = append(parts, templatePart{field: field, path: path})
			i += end + 1
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				lit.WriteByte('}')
				i++
				continue
			}
			return nil, fmt.Errorf("unmatched \"}\" at offset %d (write \"}}\" for a literal brace)", i)
		default:
			lit.WriteByte(s[i])
		}
	}
	flush()
	return parts, nil
}

func (tm template) fields() int {
	n := 0
	for _, p := range tm {
		if p.path != nil {
			n++
		}
	}
	return n
}

// DeriveKey renders the tool's intent template over payload. It returns "", nil for a tool
// without a template. Every error is a *PayloadError.
func (t *Tool) DeriveKey(payload map[string]any) (string, error) {
	if t.Intent == "" {
		return "", nil
	}
	tm, err := parseTemplate(t.Intent)
	if err != nil {
		// Parse checked the template; only a hand-made or corrupted Tool gets here.
		return "", fmt.Errorf("tool %q: intent template %q: %w", t.Name, t.Intent, err)
	}
	var b strings.Builder
	for _, p := range tm {
		if p.path == nil {
			b.WriteString(p.literal)
			continue
		}
		v, reason := lookupField(payload, p.path)
		if reason != "" {
			return "", &PayloadError{Field: p.field, Reason: reason + " (the intent key needs it)"}
		}
		s, reason := keyValue(v)
		if reason != "" {
			return "", &PayloadError{Field: p.field, Reason: reason}
		}
		b.WriteString(s)
	}
	key := b.String()
	if err := ValidateKey(key); err != nil {
		return "", &PayloadError{Field: FieldIntentKey, Reason: fmt.Sprintf("the key rendered from %q is invalid: %v", t.Intent, err), Err: err}
	}
	return key, nil
}

// RenderPreview renders the tool's preview templates over payload, leniently: a missing field
// renders as "", a string verbatim, a number as written, anything else as compact JSON.
func (t *Tool) RenderPreview(payload map[string]any) map[string]string {
	if len(t.Preview) == 0 {
		return nil
	}
	out := make(map[string]string, len(t.Preview))
	for name, text := range t.Preview {
		tm, err := parseTemplate(text)
		if err != nil {
			out[name] = text // a hand-made Tool: show the template rather than nothing
			continue
		}
		var b strings.Builder
		for _, p := range tm {
			if p.path == nil {
				b.WriteString(p.literal)
				continue
			}
			if v, reason := lookupField(payload, p.path); reason == "" {
				b.WriteString(previewValue(v))
			}
		}
		out[name] = b.String()
	}
	return out
}

// lookupField follows path through nested objects. reason is "" when the field was found.
func lookupField(payload map[string]any, path []string) (any, string) {
	var cur any = payload
	for i, name := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Sprintf("missing: %q is %s, not an object", strings.Join(path[:i], "."), describe(cur))
		}
		v, ok := obj[name]
		if !ok {
			return nil, "missing"
		}
		cur = v
	}
	return cur, ""
}

// keyValue renders one intent field. reason is "" on success.
func keyValue(v any) (string, string) {
	const want = "; an intent field must be a string or a whole number"
	switch v := v.(type) {
	case string:
		if v == "" {
			// An empty field would make every such call share one key, e.g. "email::welcome".
			return "", "is an empty string" + want
		}
		return v, ""
	case json.Number:
		s, err := integralDecimal(string(v))
		if err != nil {
			return "", err.Error() + want
		}
		return s, ""
	case float64:
		return integralFloat(v, 64)
	case float32:
		return integralFloat(float64(v), 32)
	case int:
		return strconv.FormatInt(int64(v), 10), ""
	case int8:
		return strconv.FormatInt(int64(v), 10), ""
	case int16:
		return strconv.FormatInt(int64(v), 10), ""
	case int32:
		return strconv.FormatInt(int64(v), 10), ""
	case int64:
		return strconv.FormatInt(v, 10), ""
	case uint:
		return strconv.FormatUint(uint64(v), 10), ""
	case uint8:
		return strconv.FormatUint(uint64(v), 10), ""
	case uint16:
		return strconv.FormatUint(uint64(v), 10), ""
	case uint32:
		return strconv.FormatUint(uint64(v), 10), ""
	case uint64:
		return strconv.FormatUint(v, 10), ""
	}
	return "", "is " + describe(v) + want
}

func integralFloat(f float64, bits int) (string, string) {
	const want = "; an intent field must be a string or a whole number"
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "", "is not a finite number" + want
	}
	if f != math.Trunc(f) {
		return "", "is a fraction (" + strconv.FormatFloat(f, 'g', -1, bits) + ")" + want
	}
	if f == 0 {
		return "0", "" // also for -0
	}
	return strconv.FormatFloat(f, 'f', -1, bits), ""
}

// integralDecimal turns a JSON number with an integral value into plain decimal digits,
// exactly: "17", "17.0", "1.7e1" and "170e-1" all give "17". It works on the digits rather
// than through math/big so that a short number like "1e999999999" cannot make it allocate
// a billion digits: a result longer than a key can be is refused.
func integralDecimal(s string) (string, error) {
	num := s
	neg := strings.HasPrefix(num, "-")
	if neg {
		num = num[1:]
	}
	exp := 0
	if i := strings.IndexAny(num, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(num[i+1:], "+"))
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return "", fmt.Errorf("is a number too large or too small for an intent key (%s)", abbreviate(s))
			}
			return "", fmt.Errorf("is not a valid number (%s)", abbreviate(s))
		}
		exp = e
		num = num[:i]
	}
	intPart, frac, _ := strings.Cut(num, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return "", fmt.Errorf("is not a valid number (%s)", abbreviate(s))
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	if exp < 0 {
		return "", fmt.Errorf("is a fraction (%s)", abbreviate(s))
	}
	if len(digits)+exp > MaxKeyLength {
		return "", fmt.Errorf("is a number too large for an intent key (%s)", abbreviate(s))
	}
	out := digits + strings.Repeat("0", exp)
	if neg {
		out = "-" + out
	}
	return out, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func abbreviate(s string) string {
	const limit = 40
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

// previewValue renders one preview field: strings verbatim, numbers as written, anything
// else as compact JSON.
func previewValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the dashboard escapes; "<" should read as "<"
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// describe names the JSON type of v with an article, for error reasons.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}
