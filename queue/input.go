package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
)

// The checks every face (REST, dashboard, MCP) applies to its input once it
// has decoded it its own way: what JSON storage can hold, and the wait,
// state and listing parameters of reads.

// StorableJSON is the one check of JSON that will be stored: a payload, a
// result, an edited payload, a tool call's arguments. raw must be valid
// UTF-8, one JSON value with nothing after it, within the limits of
// CheckStrictJSON (no duplicate key, no number out of range, nesting at most
// MaxJSONDepth), and hold no NUL character in any string or key
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
	if err := CheckStrictJSON(raw, 0); StrictRefusal(err) {
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
// (classify.ValidateKey: 1-255 printable characters); the invalid_request
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

// CheckQuery refuses a raw query string holding a parameter outside names,
// or one twice, with an invalid_request naming it: every agent endpoint
// (the REST routes, /mcp) names what it reads, and a parameter it does not
// know is never silently ignored.
func CheckQuery(raw string, names ...string) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return Errorf(CodeInvalidRequest, "the query string is not valid: %v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(names, k) && len(names) == 0:
			return Errorf(CodeInvalidRequest, "unknown query parameter %q: this endpoint takes none", k)
		case !slices.Contains(names, k):
			return Errorf(CodeInvalidRequest, "unknown query parameter %q; this endpoint takes %s", k, strings.Join(names, ", "))
		case len(q[k]) > 1:
			return Errorf(CodeInvalidRequest, "query parameter %q is given %d times; give it once", k, len(q[k]))
		}
	}
	return nil
}

// ParseWait reads the wait of a long-poll: a Go duration from 0 to
// MaxWait; "" is no wait.
func ParseWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, Errorf(CodeInvalidRequest, "wait must be a Go duration such as 30s")
	}
	if d > MaxWait {
		return 0, Errorf(CodeInvalidRequest, "wait may be at most %s", MaxWait)
	}
	return d, nil
}

// ParseState reads a state filter; "" is none.
func ParseState(s string) (State, error) {
	st := State(s)
	if s != "" && !st.Valid() {
		return "", Errorf(CodeInvalidRequest, "state %q is not a state", s)
	}
	return st, nil
}

// Listing limits: the default page and the most a caller may ask for.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// ParseListRequest reads the listing filters every face shares (intent_key,
// state, tool, limit, cursor), each as text; get returns "" for an absent
// one.
func ParseListRequest(get func(string) string) (ListRequest, error) {
	r := ListRequest{IntentKey: get("intent_key"), Tool: get("tool"), Cursor: get("cursor"), Limit: DefaultListLimit}
	var err error
	if r.State, err = ParseState(get("state")); err != nil {
		return r, err
	}
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxListLimit {
			return r, Errorf(CodeInvalidRequest, "limit must be a whole number from 1 to %d", MaxListLimit)
		}
		r.Limit = n
	}
	return r, nil
}

// ToolView is how agents see one tool (GET /api/v1/tools, list_tools).
type ToolView struct {
	Name        string         `json:"name"`
	Class       classify.Class `json:"class"`
	Reason      string         `json:"reason"`
	Description string         `json:"description"`
	Intent      string         `json:"intent"`
	Check       string         `json:"check"`
	Guidance    string         `json:"guidance"`
	Webhook     bool           `json:"webhook"`
	// Upstream and UpstreamTool name the MCP server and tool that approvals
	// calls; Unavailable says why it cannot be called now.
	Upstream     string               `json:"upstream,omitempty"`
	UpstreamTool string               `json:"upstream_tool,omitempty"`
	Unavailable  string               `json:"unavailable,omitempty"`
	Annotations  classify.Annotations `json:"annotations"`
	Schema       json.RawMessage      `json:"schema"`
}

// ToolViews describes the registry for agents.
func ToolViews(reg *classify.Registry) []ToolView {
	tools := reg.Tools()
	out := make([]ToolView, 0, len(tools))
	for _, t := range tools {
		v := ToolView{Name: t.Name, Class: t.Class, Reason: t.Reason, Description: t.Description, Intent: t.Intent,
			Check: t.Check, Guidance: t.Guidance(), Webhook: t.Executor != nil && t.Executor.Webhook != "",
			Annotations: t.Annotations, Schema: t.Schema,
			Upstream: t.Upstream, UpstreamTool: t.UpstreamTool, Unavailable: t.Unavailable}
		if v.Schema == nil {
			v.Schema = json.RawMessage("null")
		}
		out = append(out, v)
	}
	return out
}

// ActionList is a page of actions (GET /api/v1/actions, find_actions).
type ActionList struct {
	Actions    []*Action `json:"actions"`
	NextCursor *string   `json:"next_cursor"`
}

// NewActionList is the page of list with the cursor of the next one ("" at
// the end); an empty page lists [] rather than null.
func NewActionList(list []*Action, next string) ActionList {
	out := ActionList{Actions: list}
	if out.Actions == nil {
		out.Actions = []*Action{}
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out
}
