package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/queue"
)

// maxArguments caps the arguments of one call, as the default
// APPROVALS_MAX_BODY caps a REST request body.
const maxArguments = 256 << 10

// arguments are a call's arguments by name, each as the JSON it was sent.
type arguments map[string]json.RawMessage

// decodeArguments applies the REST body checks to a call's arguments: at
// most maxArguments bytes, valid UTF-8, one JSON object, and no NUL
// character in any string or key (PostgreSQL's jsonb and text cannot hold
// one). Absent arguments are an empty object.
func decodeArguments(raw json.RawMessage) (arguments, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if len(raw) > maxArguments {
		return nil, queue.Errorf(queue.CodePayloadTooLarge, "the arguments are larger than %d bytes", maxArguments)
	}
	if !utf8.Valid(raw) {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "the arguments are not valid UTF-8")
	}
	var args arguments
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "the arguments must be a JSON object")
	}
	// The REST decoder owns the NUL rule; hand it the arguments as the
	// payload of a submission body, and name the offending argument the way
	// the model wrote it.
	body, err := marshal(handlers.SubmitBody{Tool: "arguments", Payload: raw})
	if err != nil {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "the arguments are not valid JSON")
	}
	if _, err := handlers.DecodeSubmit(body, ""); err != nil {
		var qe *queue.Error
		if !errors.As(err, &qe) {
			return nil, err
		}
		if rest, ok := strings.CutPrefix(qe.Detail, "payload."); ok {
			return nil, queue.Errorf(qe.Code, "argument %s", rest)
		}
		return nil, queue.Errorf(qe.Code, "the arguments: %s", qe.Detail)
	}
	return args, nil
}

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

// submission turns a guarded tool's arguments into the body of a REST
// submission (intent_key apart, the rest as payload) and decodes it with the
// REST decoder, so both faces accept exactly the same submissions.
func submission(tool string, args arguments) (handlers.SubmitBody, error) {
	payload := make(map[string]json.RawMessage, len(args))
	var key json.RawMessage
	for k, v := range args {
		if k == argIntentKey {
			key = v
			continue
		}
		payload[k] = v
	}
	p, err := marshal(payload)
	if err != nil {
		return handlers.SubmitBody{}, queue.Errorf(queue.CodeInvalidRequest, "the arguments are not valid JSON")
	}
	body, err := marshal(struct {
		Tool      string          `json:"tool"`
		Payload   json.RawMessage `json:"payload"`
		IntentKey json.RawMessage `json:"intent_key,omitempty"`
	}{tool, p, key})
	if err != nil {
		return handlers.SubmitBody{}, queue.Errorf(queue.CodeInvalidRequest, "the arguments are not valid JSON")
	}
	return handlers.DecodeSubmit(body, "")
}

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
