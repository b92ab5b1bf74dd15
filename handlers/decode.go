package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"unicode/utf8"

	"github.com/approvals/approvals/payload"
	"github.com/approvals/approvals/queue"
)

// SubmitBody is the body of POST /api/v1/actions.
type SubmitBody struct {
	Tool      string          `json:"tool"`
	Payload   json.RawMessage `json:"payload"`
	IntentKey string          `json:"intent_key,omitempty"`
	// Plan names the approved plan this submission is a step of.
	Plan string `json:"plan,omitempty"`
}

// readBody reads at most max bytes; more is payload_too_large.
func readBody(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "could not read the request body")
	}
	if int64(len(b)) > max {
		return nil, queue.Errorf(queue.CodePayloadTooLarge, "request body is larger than %d bytes", max)
	}
	return b, nil
}

// DecodeSubmit parses and checks a submission body and the Idempotency-Key
// header. Every failure is an invalid_request naming what is wrong; a
// success guarantees valid UTF-8, a JSON object payload, no NUL character
// anywhere and a well-formed key.
func DecodeSubmit(body []byte, idempotencyKey string) (SubmitBody, error) {
	var sb SubmitBody
	raw, err := decodeObjectFields(body, map[string]bool{"tool": true, "payload": true, "intent_key": true, "plan": true})
	if err != nil {
		return sb, err
	}
	if p, ok := raw["plan"]; ok {
		if err := decodeString(p, &sb.Plan); err != nil || !queue.ValidID(sb.Plan) {
			return sb, queue.Errorf(queue.CodeInvalidRequest, "plan must be the id of a plan (a string as POST /api/v1/plans answers it)")
		}
	}
	toolRaw, ok := raw["tool"]
	if !ok {
		return sb, queue.Errorf(queue.CodeInvalidRequest, "tool is required")
	}
	if err := decodeString(toolRaw, &sb.Tool); err != nil {
		return sb, queue.Errorf(queue.CodeInvalidRequest, "tool must be a string")
	}
	if sb.Tool == "" || len(sb.Tool) > 128 || !printable(sb.Tool) {
		return sb, queue.Errorf(queue.CodeInvalidRequest, "tool must be 1-128 printable characters")
	}
	p, ok := raw["payload"]
	if !ok {
		return sb, queue.Errorf(queue.CodeInvalidRequest, "payload is required")
	}
	if t := bytes.TrimSpace(p); len(t) == 0 || t[0] != '{' {
		return sb, queue.Errorf(queue.CodeInvalidRequest, "payload must be a JSON object")
	}
	sb.Payload = p
	if sb.IntentKey, err = queue.DecodeIntentKey(raw["intent_key"]); err != nil {
		return sb, err
	}
	if idempotencyKey != "" {
		if err := queue.ValidIntentKey(idempotencyKey, "Idempotency-Key header"); err != nil {
			return sb, err
		}
		if sb.IntentKey != "" && sb.IntentKey != idempotencyKey {
			return sb, queue.Errorf(queue.CodeInvalidRequest, "the Idempotency-Key header and intent_key differ; send one, or the same value in both")
		}
		sb.IntentKey = idempotencyKey
	}
	return sb, nil
}

// decodeString decodes a JSON string from raw, valid JSON as
// decodeObjectFields returns it; one without escapes is its own text.
func decodeString(raw json.RawMessage, s *string) error {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		*s = string(raw[1 : len(raw)-1])
		return nil
	}
	return json.Unmarshal(raw, s)
}

// decodeObjectFields checks that body is one JSON object in valid UTF-8
// with no NUL character in any string or key, and no field outside allowed.
func decodeObjectFields(body []byte, allowed map[string]bool) (map[string]json.RawMessage, error) {
	if !utf8.Valid(body) {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "body is not valid UTF-8")
	}
	// The common case in one pass: one JSON object with no NUL escape,
	// checked and split into its members at once. Everything else takes
	// the steps below, which say what is wrong.
	if !bytes.Contains(body, []byte(`\u0000`)) {
		raw, err := payload.StrictMembers(body)
		if payload.StrictRefusal(err) {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "body: %v", err)
		}
		if err == nil && raw != nil {
			return checkFields(raw, allowed)
		}
	}
	if err := refuseStrict("body", body); err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var top json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "body is not valid JSON: %s", queue.JSONErrorText(err))
	}
	if dec.More() || !onlySpace(body[dec.InputOffset():]) {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "body has data after the JSON object")
	}
	if top[0] != '{' {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "body must be a JSON object")
	}
	// JSON can only spell a NUL character as the escape \u0000, so only a
	// body holding that text needs decoding to find where it is.
	if bytes.Contains(top, []byte(`\u0000`)) {
		if _, err := queue.StorableJSON(top, "", true, queue.CodeInvalidRequest); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal(top, &raw); err != nil {
		return nil, queue.Errorf(queue.CodeInvalidRequest, "body is not valid JSON: %s", queue.JSONErrorText(err))
	}
	return checkFields(raw, allowed)
}

// refuseStrict refuses JSON in which an object names a key twice, a number
// is out of range or objects nest too deep (invalid_request naming where);
// any other fault is left to the decoder that follows, which words it.
func refuseStrict(what string, b []byte) error {
	if err := payload.CheckStrictJSON(b, 0); payload.StrictRefusal(err) {
		return queue.Errorf(queue.CodeInvalidRequest, "%s: %v", what, err)
	}
	return nil
}

func checkFields(raw map[string]json.RawMessage, allowed map[string]bool) (map[string]json.RawMessage, error) {
	for k := range raw {
		if !allowed[k] {
			return nil, queue.Errorf(queue.CodeInvalidRequest, "unknown field %q", k)
		}
	}
	return raw, nil
}

func onlySpace(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}
