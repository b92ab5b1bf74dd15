package classify

import (
	"bytes"
	"encoding/json"
	"maps"
	"time"
)

// Defaults and limits of a tool definition.
const (
	DefaultClaimTimeout   = 5 * time.Minute
	DefaultExpiresAfter   = 72 * time.Hour
	MaxWebhookTimeout     = 30 * time.Second // the default executor timeout, unless half of claim_timeout is shorter
	MaxToolNameLength     = 64
	MaxKeyLength          = 255
	FieldIntentKey        = "intent_key" // PayloadError.Field when the rendered key itself is invalid
	webhookSecretVariable = "APPROVALS_WEBHOOK_SECRET"
)

// FieldPlan is the argument that names an approved plan in an MCP call of a guarded tool,
// beside intent_key; like it, it is not part of the payload, so no schema may define a
// payload field of that name.
const FieldPlan = "plan"

// Annotations are MCP tool annotation hints; nil means absent (MCP defaults: readOnly false,
// idempotent false, openWorld true).
type Annotations struct {
	ReadOnlyHint   *bool `yaml:"readOnlyHint" json:"readOnlyHint,omitempty"`
	IdempotentHint *bool `yaml:"idempotentHint" json:"idempotentHint,omitempty"`
	OpenWorldHint  *bool `yaml:"openWorldHint" json:"openWorldHint,omitempty"`
}

// Executor delivers an approved at-most-once action to a webhook.
type Executor struct {
	Webhook string        `json:"webhook"`
	Timeout time.Duration `json:"timeout"` // one delivery; default min(30s, ClaimTimeout/2); always < ClaimTimeout
	// Secret signs this tool's deliveries in place of APPROVALS_WEBHOOK_SECRET (the value,
	// after ${VAR} expansion). It never reaches an action's snapshot: the dispatcher takes it
	// from the tools file in force.
	Secret string `json:"-"`
}

// Tool is a tool definition after defaults and classification. It round-trips through
// encoding/json unchanged, because an action stores it as a snapshot: a later change of the
// tools file affects new submissions only. It holds no compiled state; Validate compiles the
// schema lazily through a cache shared by all copies.
type Tool struct {
	Name         string            `json:"name"`
	Class        Class             `json:"class"`
	Reason       string            `json:"reason"`     // one sentence: why it has this class
	Registered   bool              `json:"registered"` // false for a tool not in the file
	Description  string            `json:"description,omitempty"`
	Intent       string            `json:"intent,omitempty"` // template such as "refund:{order_id}:{line_id}"
	ClaimTimeout time.Duration     `json:"claim_timeout"`
	ExpiresAfter time.Duration     `json:"expires_after"`
	Check        string            `json:"check,omitempty"`
	Executor     *Executor         `json:"executor,omitempty"`
	Preview      map[string]string `json:"preview,omitempty"` // templates over payload fields, rendered leniently
	Schema       json.RawMessage   `json:"schema,omitempty"`  // the JSON Schema as compact JSON, if any
	Annotations  Annotations       `json:"annotations"`
	// Upstream names the MCP server that executes the tool, UpstreamTool the tool's name
	// there; both empty for a tool approvals does not execute through MCP.
	Upstream     string `json:"upstream,omitempty"`
	UpstreamTool string `json:"upstream_tool,omitempty"`
	// Unavailable, when set, says why the tool cannot be called now (its upstream is down or
	// no longer lists it); calls are refused with it rather than left to hang.
	Unavailable string `json:"unavailable,omitempty"`
	// Approval is the tool's approval rule (at-most-once tools only); nil: one approval by
	// any approver or admin, told to no channel.
	Approval *Approval `json:"approval,omitempty"`
	// Verify says how approvals asks the system of record whether an
	// action's effect happened (section 18); nil: it cannot ask.
	Verify *Verify `json:"verify,omitempty"`
}

// Unregistered is the definition used for a tool that is not in the tools file: at-most-once
// so that a human sees it (fail closed), with no intent template, so the caller must supply
// the intent key.
func Unregistered(name string) Tool {
	return Tool{
		Name:         name,
		Class:        AtMostOnce,
		Reason:       reasonUnregistered,
		Registered:   false,
		ClaimTimeout: DefaultClaimTimeout,
		ExpiresAfter: DefaultExpiresAfter,
	}
}

// HasWebhook reports whether approvals delivers the tool's approved actions itself.
func (t *Tool) HasWebhook() bool { return t.Executor != nil && t.Executor.Webhook != "" }

// Guidance is Guidance(t.Class) plus, for an at-most-once tool, what happens after approval,
// and for a tool with a policy, what its rules may do.
func (t *Tool) Guidance() string {
	g := t.classGuidance()
	if t.HasPolicy() {
		g += " " + policyGuidance
	}
	if t.HasVerifier() {
		g += " " + verifierGuidance
	}
	return g
}

// verifierGuidance is what a tool's verifier means for the agent calling it.
const verifierGuidance = "Its verifier asks the system of record: when an outcome is unknown (a timeout, a lost answer), call verify_action " +
	"with the action's id instead of sending it again; a done verdict returns the stored result."

// policyGuidance is what a tool's policy means for the agent calling it.
const policyGuidance = "Its policy (the rules list_tools shows) decides some calls at once: approved means it may be executed now " +
	"(execute_action, unless approvals executes it itself); rejected is final and decision_note says why; pending waits for a person, " +
	"also for a call that would otherwise be claimed at once."

func (t *Tool) classGuidance() string {
	if t.Upstream != "" {
		return t.upstreamGuidance()
	}
	g := Guidance(t.Class)
	if t.Class != AtMostOnce && t.Class.Valid() {
		return g
	}
	if t.HasWebhook() {
		return g + " Once approved, approvals delivers it itself: never send it yourself."
	}
	return g + " Once approved, call execute_action once, send its approved_payload, then call complete_action or fail_action."
}

// clone returns a copy that shares no mutable memory with t, so a caller of Lookup cannot
// change the registry.
func (t Tool) clone() Tool {
	if t.Executor != nil {
		e := *t.Executor
		t.Executor = &e
	}
	t.Preview = maps.Clone(t.Preview)
	if t.Schema != nil {
		t.Schema = bytes.Clone(t.Schema)
	}
	if t.Approval != nil {
		a := t.Approval.clone()
		t.Approval = &a
	}
	if t.Verify != nil {
		v := *t.Verify
		v.Arguments = maps.Clone(v.Arguments)
		t.Verify = &v
	}
	t.Annotations = Annotations{
		ReadOnlyHint:   cloneBool(t.Annotations.ReadOnlyHint),
		IdempotentHint: cloneBool(t.Annotations.IdempotentHint),
		OpenWorldHint:  cloneBool(t.Annotations.OpenWorldHint),
	}
	return t
}

func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}
