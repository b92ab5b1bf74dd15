package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
)

// post answers PostToolUse: the call this hook allowed has run, and its
// tool_response completes the action it claimed.
func (h *hook) post(ctx context.Context) Output {
	t, err := h.lookup(ctx)
	if err != nil {
		return postBlock("approvals could not record this call's outcome: " + err.Error() + ". Do not run it again.")
	}
	if t.Class == string(classify.AtLeastOnce) {
		return Output{} // recorded before it ran; nothing is held
	}
	key, err := h.intentKey(t)
	if err != nil {
		return postBlock("approvals could not find this call's action: " + err.Error())
	}
	var list struct {
		Actions []action `json:"actions"`
	}
	q := url.Values{"intent_key": {key}, "tool": {h.tool()}, "limit": {"1"}}
	if _, err := h.request(ctx, http.MethodGet, "/api/v1/actions?"+q.Encode(), nil, shortTimeout, &list); err != nil {
		return postBlock("approvals could not record this call's outcome: " + err.Error() + ". Do not run it again.")
	}
	if len(list.Actions) == 0 {
		return postBlock(fmt.Sprintf("approvals has no action for this call (intent %q): it ran without approval.", key))
	}
	a := &list.Actions[0]
	switch a.State {
	case "done":
		return postContext("approvals: " + h.describe(a) + " is done.")
	case "in_progress":
	default:
		return postBlock(fmt.Sprintf("approvals: %s is %s, not claimed by this call, yet the call ran.", h.describe(a), a.State))
	}
	var done action
	if _, err := h.request(ctx, http.MethodPost, "/api/v1/actions/"+a.ID+"/complete", map[string]any{"result": h.result()}, shortTimeout, &done); err != nil {
		return postBlock(fmt.Sprintf("approvals could not record the outcome of %s: %v. Do not run this call again: an operator reconciles it.", h.describe(a), err))
	}
	return postContext("approvals: recorded the outcome; " + h.describe(&done) + " is done.")
}

// intentKey is the key PreToolUse submitted: the tools file's template over
// the same payload (rendered by the same code as the server's), or the
// hook's own key.
func (h *hook) intentKey(t toolInfo) (string, error) {
	if t.Intent == "" {
		return h.defaultKey()
	}
	d := json.NewDecoder(bytes.NewReader(h.in.ToolInput))
	d.UseNumber()
	var input map[string]any
	if err := d.Decode(&input); err != nil {
		return "", fmt.Errorf("tool_input: %w", err)
	}
	spec := classify.Tool{Name: t.Name, Intent: t.Intent}
	return spec.DeriveKey(map[string]any{"tool_input": input, "cwd": h.in.Cwd, "session_id": h.in.SessionID})
}

// result is the tool_response as the action's result; one too long to store
// is kept as its first 60 KiB of JSON text.
func (h *hook) result() any {
	r := h.in.ToolResponse
	if len(r) == 0 {
		return nil
	}
	if len(r) <= maxResult {
		return r
	}
	cut := r[:maxResult]
	for len(cut) > 0 && !utf8.Valid(cut) {
		cut = cut[:len(cut)-1]
	}
	return map[string]any{"truncated": true, "bytes": len(r), "tool_response": string(cut)}
}
