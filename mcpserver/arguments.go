package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/approvals/approvals/payload"
	"github.com/approvals/approvals/queue"
)

// defaultMaxBody caps the arguments of one call when New is given no limit,
// as the default APPROVALS_MAX_BODY caps a REST request body.
const defaultMaxBody = 256 << 10

// arguments are a call's arguments by name, each as the JSON it was sent.
type arguments map[string]json.RawMessage

// argumentsDepth is how deep a call's arguments lie in the JSON-RPC
// request: {"params": {"arguments": {...}}}.
const argumentsDepth = 2

// rawArguments applies the checks every call shares: absent arguments are an
// empty object, and the arguments are at most max bytes of valid UTF-8 with
// no object anywhere naming a key twice, no number out of range and no
// nesting too deep (payload.CheckStrictJSON). This is the one strict check of
// a call: it sees the whole arguments object, so it also catches a repeated
// argument name, which decoding into a map would silently merge.
func rawArguments(raw json.RawMessage, max int64) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if int64(len(raw)) > max {
		return nil, queue.Errorf(queue.CodePayloadTooLarge, "the arguments are larger than %d bytes", max)
	}
	if !utf8.Valid(raw) {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "the arguments are not valid UTF-8")
	}
	// The arguments lie at depth 2 of the request body (params.arguments),
	// where the nesting limit counts from.
	if err := payload.CheckStrictJSON(raw, argumentsDepth); payload.StrictRefusal(err) {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "arguments: %v", err)
	}
	return raw, nil
}

// decodeArguments decodes the arguments of a read or drive tool: at most
// max bytes, valid UTF-8, no duplicate keys, one JSON object, and no NUL
// character in any string or key. Absent arguments are an empty object.
func decodeArguments(raw json.RawMessage, max int64) (arguments, error) {
	raw, err := rawArguments(raw, max)
	if err != nil {
		return nil, err
	}
	if err := stepNUL(raw); err != nil {
		return nil, err
	}
	return objectArguments(raw)
}

// stepNUL refuses a NUL character inside one of propose_plan's steps
// naming the step by its number from 1, as every other fault of a step is
// named; the arguments' own check would name it by its index from 0
// ("argument steps[0].tool"), which reads as another step. Only
// propose_plan among the tools decoded here takes steps.
func stepNUL(raw json.RawMessage) error {
	if !bytes.Contains(raw, []byte(`\u0000`)) {
		return nil
	}
	var top struct {
		Steps []json.RawMessage `json:"steps"`
	}
	if json.Unmarshal(raw, &top) != nil {
		return nil // the arguments' own check says what is wrong
	}
	for i, st := range top.Steps {
		v, err := queue.DecodeJSON(st)
		if err != nil {
			continue
		}
		var e *queue.Error
		if err := queue.RefuseNUL(v, ""); errors.As(err, &e) {
			return queue.Errorf(e.Code, "steps[%d]: %s", i+1, e.Detail)
		}
	}
	return nil
}

// objectArguments splits one JSON object, checked by rawArguments, into its
// arguments and refuses a NUL character in any of them, naming it by the
// argument's path (storage cannot hold one).
func objectArguments(raw json.RawMessage) (arguments, error) {
	var args arguments
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, errNotObject
	}
	// JSON can spell a NUL character only as the escape \u0000, so only
	// arguments holding that text need decoding to find where it is.
	if !bytes.Contains(raw, []byte(`\u0000`)) {
		return args, nil
	}
	for name, v := range args {
		if strings.IndexByte(name, 0) >= 0 {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "an argument name contains a NUL character")
		}
		decoded, err := queue.DecodeJSON(v)
		if err != nil {
			return nil, errNotObject
		}
		if err := queue.RefuseNUL(decoded, "argument "+name); err != nil {
			return nil, err
		}
	}
	return args, nil
}

var errNotObject = queue.Errorf(queue.CodeInvalidRequest, "the arguments must be a JSON object")

// only refuses arguments outside names, as the REST decoder refuses unknown
// body fields.
func (a arguments) only(names ...string) error {
	var unknown []string
	for k := range a {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	if len(names) == 0 {
		return queue.Errorf(queue.CodeInvalidRequest, "unknown argument %q: this tool takes no arguments", unknown[0])
	}
	return queue.Errorf(queue.CodeInvalidRequest, "unknown argument %q; this tool takes %s", unknown[0], strings.Join(names, ", "))
}

// string returns a string argument; "" when it is absent or null and not
// required.
func (a arguments) string(name string, required bool) (string, error) {
	raw, ok := a[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		if required {
			return "", queue.Errorf(queue.CodeInvalidRequest, "%s is required", name)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", queue.Errorf(queue.CodeInvalidRequest, "%s must be a string", name)
	}
	if required && strings.TrimSpace(s) == "" {
		return "", queue.Errorf(queue.CodeInvalidRequest, "%s must not be empty", name)
	}
	return s, nil
}

// submission is what a guarded tool's call submits: the arguments without
// intent_key as the payload, byte for byte as the client wrote them (key
// order, number spelling and escapes kept), and the intent key.
type submission struct {
	Payload   json.RawMessage
	IntentKey string
	// Plan is the approved plan the call is a step of (argPlan).
	Plan string
}

// decodeSubmission decodes a guarded tool's raw arguments, with the checks
// a REST submission gets: size, UTF-8, storable JSON, a well-formed key.
func decodeSubmission(raw json.RawMessage, max int64) (submission, error) {
	raw, err := rawArguments(raw, max)
	if err != nil {
		return submission{}, err
	}
	if _, err := objectArguments(raw); err != nil {
		return submission{}, err
	}
	payload, key, plan, err := splitIntentKey(raw)
	if err != nil {
		return submission{}, err
	}
	sub := submission{Payload: payload}
	if sub.IntentKey, err = queue.DecodeIntentKey(key); err != nil {
		return submission{}, err
	}
	if plan != nil {
		if json.Unmarshal(plan, &sub.Plan) != nil || !queue.ValidID(sub.Plan) {
			return submission{}, queue.Errorf(queue.CodeInvalidRequest, "%s must be the id of a plan, as propose_plan answers it", argPlan)
		}
	}
	return sub, nil
}

// splitIntentKey takes the intent_key and plan members out of the
// arguments object raw and returns the rest unchanged, member by member as
// written, with the value of the last intent_key member and of the plan
// member (nil when there is none; with neither, payload is raw itself). Duplicate names never reach it: rawArguments
// refuses them first.
func splitIntentKey(raw json.RawMessage) (payload, key, plan json.RawMessage, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, nil, errNotObject
	}
	// Each member runs from its key to the end of its value; what lies
	// between two members is their separator (a comma and spaces).
	type member struct{ start, end int }
	var (
		members []member
		drop    []bool
		end     = int(dec.InputOffset()) // the end of what was read so far
	)
	for dec.More() {
		start := end
		for start < len(raw) && (raw[start] == ',' || isSpace(raw[start])) {
			start++
		}
		t, err := dec.Token()
		if err != nil {
			return nil, nil, nil, errNotObject
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, nil, errNotObject
		}
		end = int(dec.InputOffset())
		members = append(members, member{start, end})
		drop = append(drop, name == argIntentKey || name == argPlan)
		switch name {
		case argIntentKey:
			key = bytes.TrimSpace(v)
		case argPlan:
			plan = bytes.TrimSpace(v)
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') || !onlySpace(raw[dec.InputOffset():]) {
		return nil, nil, nil, errNotObject
	}
	if key == nil && plan == nil {
		return raw, nil, nil, nil
	}
	// '{' and the spaces before the first member, the kept members each with
	// the separator that preceded it (none before the first kept), then the
	// spaces and '}' after the last member.
	out := make([]byte, 0, len(raw))
	out = append(out, raw[:members[0].start]...)
	kept := 0
	for i, m := range members {
		if drop[i] {
			continue
		}
		if kept > 0 {
			out = append(out, raw[members[i-1].end:m.start]...)
		}
		out = append(out, raw[m.start:m.end]...)
		kept++
	}
	out = append(out, raw[members[len(members)-1].end:]...)
	return out, key, plan, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func onlySpace(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

// marshal encodes v without escaping <, > and &, so a payload keeps the
// characters the model wrote.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b.Bytes()), nil
}
