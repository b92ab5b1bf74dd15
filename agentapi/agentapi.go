// Package agentapi is what the two agent faces, the REST API (handlers)
// and the MCP endpoint (mcpserver), put on the wire alike and read alike:
// the page of actions, the tools as agents see them, and the wait, state
// and listing filters, each read from text. Each face decodes its own
// request; these give both the same words and the same limits.
package agentapi

import (
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
)

// ParseWait reads the wait of a long-poll: a Go duration from 0 to
// longpoll.MaxWait; "" is no wait.
func ParseWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, queue.Errorf(queue.CodeInvalidRequest, "wait must be a Go duration such as 30s")
	}
	if d > longpoll.MaxWait {
		return 0, queue.Errorf(queue.CodeInvalidRequest, "wait may be at most %s", longpoll.MaxWait)
	}
	return d, nil
}

// ParseState reads a state filter; "" is none.
func ParseState(s string) (queue.State, error) {
	st := queue.State(s)
	if s != "" && !st.Valid() {
		return "", queue.Errorf(queue.CodeInvalidRequest, "state %q is not a state", s)
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
func ParseListRequest(get func(string) string) (queue.ListRequest, error) {
	r := queue.ListRequest{IntentKey: get("intent_key"), Tool: get("tool"), Cursor: get("cursor"), Limit: DefaultListLimit}
	var err error
	if r.State, err = ParseState(get("state")); err != nil {
		return r, err
	}
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxListLimit {
			return r, queue.Errorf(queue.CodeInvalidRequest, "limit must be a whole number from 1 to %d", MaxListLimit)
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
	// HasVerifier says approvals can ask the tool's system of record
	// whether an unknown outcome happened (verify_action).
	HasVerifier bool `json:"has_verifier"`
	// Upstream and UpstreamTool name the MCP server and tool that approvals
	// calls; Unavailable says why it cannot be called now.
	Upstream     string               `json:"upstream,omitempty"`
	UpstreamTool string               `json:"upstream_tool,omitempty"`
	Unavailable  string               `json:"unavailable,omitempty"`
	Annotations  classify.Annotations `json:"annotations"`
	Schema       json.RawMessage      `json:"schema"`
	// Policy is the tool's rules, so an agent can know in advance what
	// will wait for a person.
	Policy []RuleView `json:"policy"`
}

// RuleView is one policy rule as agents see it.
type RuleView struct {
	Name       string            `json:"name"`
	Expression string            `json:"expression"`
	Decision   classify.Decision `json:"decision"`
	Note       string            `json:"note,omitempty"`
	Required   int               `json:"required,omitempty"`
	Approvers  []string          `json:"approvers,omitempty"`
}

// RuleViews lists the tool's policy rules, in order ([] without any).
func RuleViews(t classify.Tool) []RuleView {
	out := []RuleView{}
	if !t.HasPolicy() {
		return out
	}
	for _, r := range t.Approval.Policy {
		out = append(out, RuleView{Name: r.Name, Expression: r.When, Decision: r.Decide, Note: r.Note,
			Required: r.Required, Approvers: r.Approvers})
	}
	return out
}

// ToolViews describes the registry for agents.
func ToolViews(reg *classify.Registry) []ToolView {
	tools := reg.Tools()
	out := make([]ToolView, 0, len(tools))
	for _, t := range tools {
		v := ToolView{Name: t.Name, Class: t.Class, Reason: t.Reason, Description: t.Description, Intent: t.Intent,
			Check: t.Check, Guidance: t.Guidance(), Webhook: t.Executor != nil && t.Executor.Webhook != "", HasVerifier: t.HasVerifier(),
			Annotations: t.Annotations, Schema: t.Schema,
			Upstream: t.Upstream, UpstreamTool: t.UpstreamTool, Unavailable: t.Unavailable, Policy: RuleViews(t)}
		if v.Schema == nil {
			v.Schema = json.RawMessage("null")
		}
		out = append(out, v)
	}
	return out
}

// ActionList is a page of actions (GET /api/v1/actions, find_actions).
type ActionList struct {
	Actions    []*queue.Action `json:"actions"`
	NextCursor *string         `json:"next_cursor"`
}

// NewActionList is the page of list with the cursor of the next one ("" at
// the end); an empty page lists [] rather than null.
func NewActionList(list []*queue.Action, next string) ActionList {
	out := ActionList{Actions: list}
	if out.Actions == nil {
		out.Actions = []*queue.Action{}
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out
}

// CheckQuery refuses a raw query string holding a parameter outside names,
// or one twice, with an invalid_request naming it: every agent endpoint
// (the REST routes, /mcp) names what it reads, and a parameter it does not
// know is never silently ignored. A value that is not valid UTF-8 or holds
// a NUL character is refused too, naming its parameter: storage holds
// neither, so a filter such as intent_key would otherwise fail as an
// internal error.
func CheckQuery(raw string, names ...string) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return queue.Errorf(queue.CodeInvalidRequest, "the query string is not valid: %v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(names, k) && len(names) == 0:
			return queue.Errorf(queue.CodeInvalidRequest, "unknown query parameter %q: this endpoint takes none", k)
		case !slices.Contains(names, k):
			return queue.Errorf(queue.CodeInvalidRequest, "unknown query parameter %q; this endpoint takes %s", k, strings.Join(names, ", "))
		case len(q[k]) > 1:
			return queue.Errorf(queue.CodeInvalidRequest, "query parameter %q is given %d times; give it once", k, len(q[k]))
		case !utf8.ValidString(q[k][0]):
			return queue.Errorf(queue.CodeInvalidRequest, "query parameter %q is not valid UTF-8", k)
		case strings.IndexByte(q[k][0], 0) >= 0:
			return queue.Errorf(queue.CodeInvalidRequest, "query parameter %q contains a NUL character", k)
		}
	}
	return nil
}
