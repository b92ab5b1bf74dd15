package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
)

// argIntentKey is the argument of a guarded tool that carries the intent
// key; every other argument is the payload.
const argIntentKey = "intent_key"

// argPlan is the argument of a guarded tool that names the approved plan
// the call is a step of (queue.SubmitRequest.Plan); like intent_key it is
// not part of the payload.
const argPlan = classify.FieldPlan

// guardedTool describes one registered tool as an MCP tool: the tool's own
// schema plus intent_key, its description followed by its class's guidance,
// and annotations that tell a client the call is safe to repeat behind the
// guard.
func guardedTool(t classify.Tool) *mcp.Tool {
	desc := t.Description
	if desc == "" {
		desc = fmt.Sprintf("Guarded tool %s (%s).", t.Name, t.Class)
	}
	return &mcp.Tool{
		Name:        t.Name,
		Description: desc + "\n\n" + t.Guidance(),
		InputSchema: inputSchema(t),
		Annotations: &mcp.ToolAnnotations{
			// Repeating a call with the same intent is answered from the
			// stored action: it never repeats the effect.
			IdempotentHint: true,
			ReadOnlyHint:   false,
			// An at-most-once effect reaches the outside world and cannot be
			// taken back: that is why a person approves it.
			OpenWorldHint: new(t.Class == classify.AtMostOnce),
		},
	}
}

// inputSchema is the tool's JSON Schema (or any object) with an optional
// intent_key string property added. Validation stays with the service
// (classify.Tool.Validate): this schema is what the model reads.
func inputSchema(t classify.Tool) map[string]any {
	schema := map[string]any{}
	if len(t.Schema) > 0 {
		dec := json.NewDecoder(bytes.NewReader(t.Schema))
		dec.UseNumber() // keep numbers as written in the tools file
		var m map[string]any
		if dec.Decode(&m) == nil && m != nil {
			schema = m
		}
	}
	// A payload is always an object, and MCP requires an object schema; a
	// tools file that says otherwise could never accept a call anyway.
	schema["type"] = "object"
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props[argIntentKey] = map[string]any{
		"type":        "string",
		"minLength":   1,
		"maxLength":   classify.MaxKeyLength,
		"description": intentKeyDescription(t),
	}
	props[argPlan] = map[string]any{
		"type":        "string",
		"description": "Optional: the id of an approved plan (propose_plan) this call is a step of; the call must equal the step exactly.",
	}
	schema["properties"] = props
	return schema
}

func intentKeyDescription(t classify.Tool) string {
	switch {
	case t.Intent != "":
		return fmt.Sprintf("Optional: approvals derives the intent key from the arguments with the template %q, so leave this out; a different value is refused (intent_key_mismatch).", t.Intent)
	case t.Class == classify.AtLeastOnce:
		return "Optional and informational only: every call of this tool is a new action, never deduplicated."
	}
	return "Required for this tool: the intent key naming the business fact, not the request (for example email:{customer_id}:{topic}), 1 to 255 printable characters, none invisible (no zero-width, format, filler or variation-selector characters). " +
		"Any retry, and any other agent with the same objective, must send the same key; never put a request id, UUID or timestamp in it."
}

// Argument schemas of the read and drive tools.
var (
	idProperty = map[string]any{"type": "string", "description": "The action's id, as returned in its id field."}

	getActionSchema = map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"id"},
		"properties": map[string]any{
			"id": idProperty,
			"wait": map[string]any{"type": "string", "description": fmt.Sprintf(
				"Optional long-poll, a Go duration such as \"30s\" (at most %s): answer as soon as the state differs from state, at once for a final state, or at the deadline with the current state.", longpoll.MaxWait)},
			"state": map[string]any{"type": "string", "enum": queue.States,
				"description": "With wait: the state to wait out (default: the action's state when the call arrives)."},
		},
	}
	findActionsSchema = map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{argIntentKey},
		"properties": map[string]any{
			argIntentKey: map[string]any{"type": "string", "minLength": 1, "maxLength": classify.MaxKeyLength,
				"description": "The intent key to look up: the one the tool's template derives, or the one you sent."},
			"state":  map[string]any{"type": "string", "enum": queue.States, "description": "Optional: only actions in this state."},
			"tool":   map[string]any{"type": "string", "description": "Optional: only actions of this tool."},
			"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": 200, "description": "Optional page size, default 50."},
			"cursor": map[string]any{"type": "string", "description": "Optional: next_cursor of the previous page."},
		},
	}
	emptySchema = map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{}}
	idSchema    = map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"id"},
		"properties":           map[string]any{"id": idProperty},
	}
	completeSchema = map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"id", "result"},
		"properties": map[string]any{
			"id":     idProperty,
			"result": map[string]any{"description": "What the effect returned (any JSON value), e.g. the payment provider's refund record."},
		},
	}
	failSchema = map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"id", "error"},
		"properties": map[string]any{
			"id":    idProperty,
			"error": map[string]any{"type": "string", "minLength": 1, "description": "Why the effect definitely did not happen."},
		},
	}
)

// actionAnnotations mark the read and drive tools. Read tools change
// nothing; repeating a drive tool is answered from the stored action (a
// replay or a refusal), never a second transition. Neither reaches anything
// outside approvals.
func actionAnnotations(readOnly bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: readOnly, IdempotentHint: true, OpenWorldHint: new(false)}
}

// addActionTools registers the read and drive tools, and marks the drive
// tools guarded: their transition checks a cached token
// (queue.WithTokenGuard).
func (s *server) addActionTools(ms *mcp.Server, guarded map[string]bool) {
	for _, t := range []struct {
		name, description string
		schema            map[string]any
		readOnly          bool
		run               argumentsCall
	}{
		{"get_action", "Read one action by id. With wait (a Go duration such as \"30s\", at most 60s) it long-polls: it answers as soon as " +
			"the state differs from state (default: the state when the call arrives), at once for a final state (done, failed, rejected, " +
			"expired, cancelled, recorded), or at the deadline with the current state. Use it to follow an at-most-once action until a " +
			"person approves or rejects it, instead of calling its tool again.",
			getActionSchema, true, s.getAction},
		{"find_actions", "List the actions of an intent key, newest first. Call it first whenever a tool call timed out or failed: it shows " +
			"whether the call reached approvals, which state the intent is in and who holds it, so an effect is never repeated blindly.",
			findActionsSchema, true, s.findActions},
		{"list_tools", "List the guarded tools with their class, intent template, the check operators use to verify an effect, the " +
			"guidance to follow for each, and each tool's policy rules (what is approved, rejected or sent to a person at once).",
			emptySchema, true, s.listTools},
		{"execute_action", "Take an approved action for execution (approved -> in_progress): an at-most-once one, or an exactly-once one that its tool's policy sent to a person. It succeeds once and returns the " +
			"action whose approved_payload is what to send: send it exactly once, then call complete_action or fail_action. A later " +
			"call answers in_progress, which is never permission to send. Actions whose tool has a webhook executor are delivered by " +
			"approvals itself.",
			idSchema, false, s.executeAction},
		{"complete_action", "Report that the effect of your in_progress action happened, with its result (any JSON): in_progress -> done. " +
			"Repeating it with the same result is safe. A different result, or a report on a failed action, is kept and opens an " +
			"operator ticket: it may mean the effect happened twice.",
			completeSchema, false, s.completeAction},
		{"fail_action", "Report that the effect of your in_progress action definitely did not happen, with the reason: in_progress -> " +
			"failed, which releases the intent for a new attempt. Never use it when unsure: leave the action in_progress and an " +
			"operator reconciles it.",
			failSchema, false, s.failAction},
		{"cancel_action", "Withdraw your pending or approved action before it is executed (-> cancelled); nothing is sent and the intent is released.",
			idSchema, false, s.cancelAction},
		{"verify_action", "Ask the system of record whether the effect of your in_progress action happened, when its outcome is unknown " +
			"(a timeout, a lost answer) and its tool has a verifier (list_tools: has_verifier). Answers verdict done (the action is done " +
			"with the provider's record, when the tool resolves automatically), not_done, or unknown; at most once every 10 seconds.",
			idSchema, false, s.verifyAction},
	} {
		ms.AddTool(&mcp.Tool{
			Name:        t.name,
			Description: t.description,
			InputSchema: t.schema,
			Annotations: actionAnnotations(t.readOnly),
		}, s.handle(s.withArguments(t.run), !t.readOnly))
		if !t.readOnly {
			guarded[t.name] = true
		}
	}
}
