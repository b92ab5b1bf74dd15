// Package claudecode is the Claude Code hook (`approvals hook claude-code`):
// a PreToolUse hook that puts each matched tool call through approvals before
// Claude Code runs it, and a PostToolUse hook that reports what it returned.
// It is an adapter that speaks the agent REST API over net/http, as any agent
// would; it imports no other face of the server.
//
// The hook fails closed: whatever goes wrong before a call is allowed (the
// server cannot be reached, the token is refused, stdin is not a hook input, a
// setting is missing) answers deny with the reason, never allow.
package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The settings the hook reads from its environment.
const (
	EnvURL   = "APPROVALS_URL"
	EnvToken = "APPROVALS_TOKEN"
	EnvWait  = "APPROVALS_HOOK_WAIT"
	// DefaultWait is how long PreToolUse waits for a person's decision.
	DefaultWait = 10 * time.Minute
	// ToolPrefix names a Claude Code tool in approvals: claude-code:Bash.
	ToolPrefix = "claude-code:"
	// maxResult caps the tool_response stored as an action's result (the
	// server caps results at 64 KiB); a longer one is stored as text, cut.
	maxResult = 60 << 10
)

// Config is where the hook finds approvals and how long it waits.
type Config struct {
	URL   string // the server's base URL, such as http://localhost:8080
	Token string // an agent token
	Wait  time.Duration
	// Client makes the requests; nil: a client without a timeout of its own
	// (every request carries a deadline).
	Client *http.Client
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// ConfigFromEnv reads APPROVALS_URL, APPROVALS_TOKEN and APPROVALS_HOOK_WAIT.
// The error names the setting that is missing or wrong.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{URL: strings.TrimRight(strings.TrimSpace(getenv(EnvURL)), "/"), Token: strings.TrimSpace(getenv(EnvToken)), Wait: DefaultWait}
	if c.URL == "" {
		return c, fmt.Errorf("%s is not set: it names the approvals server, such as http://localhost:8080", EnvURL)
	}
	if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		return c, fmt.Errorf("%s=%q is not an http:// or https:// URL", EnvURL, c.URL)
	}
	if c.Token == "" {
		return c, fmt.Errorf("%s is not set: create one with approvals token create --name NAME", EnvToken)
	}
	if w := strings.TrimSpace(getenv(EnvWait)); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s=%q is not a duration such as 10m", EnvWait, w)
		}
		c.Wait = d
	}
	return c, nil
}

// Input is what Claude Code writes on the hook's stdin for PreToolUse and
// PostToolUse.
type Input struct {
	SessionID     string          `json:"session_id"`
	Cwd           string          `json:"cwd"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	ToolResponse  json.RawMessage `json:"tool_response"`
}

// The hook events the hook answers.
const (
	PreToolUse  = "PreToolUse"
	PostToolUse = "PostToolUse"
)

// Output is what the hook prints on stdout: for PreToolUse the permission
// decision; for PostToolUse context for Claude, or a block with the reason
// when the outcome could not be recorded.
type Output struct {
	Decision           string         `json:"decision,omitempty"`
	Reason             string         `json:"reason,omitempty"`
	HookSpecificOutput map[string]any `json:"hookSpecificOutput,omitempty"`
}

func allow(reason string) Output { return preDecision("allow", reason) }
func deny(reason string) Output  { return preDecision("deny", reason) }

func preDecision(decision, reason string) Output {
	return Output{HookSpecificOutput: map[string]any{
		"hookEventName": PreToolUse, "permissionDecision": decision, "permissionDecisionReason": reason}}
}

func postContext(text string) Output {
	return Output{HookSpecificOutput: map[string]any{"hookEventName": PostToolUse, "additionalContext": text}}
}

// postBlock tells Claude that the outcome was not recorded: the tool has run,
// so nothing can be undone, but Claude must not run it again.
func postBlock(reason string) Output {
	return Output{Decision: "block", Reason: reason,
		HookSpecificOutput: map[string]any{"hookEventName": PostToolUse, "additionalContext": reason}}
}

// Run answers one hook invocation: it reads the input from stdin and writes
// the output to stdout. cfgErr is the error of ConfigFromEnv, reported in the
// answer rather than as a failure, so that a missing setting denies.
func Run(ctx context.Context, cfg Config, cfgErr error, stdin io.Reader, stdout io.Writer) error {
	out := answer(ctx, cfg, cfgErr, stdin)
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = stdout.Write(append(b, '\n'))
	return err
}

func answer(ctx context.Context, cfg Config, cfgErr error, stdin io.Reader) Output {
	in, err := readInput(stdin)
	if err != nil {
		// Which event is unknown; a PreToolUse deny is the answer that can
		// never let a call through.
		return deny("approvals: " + err.Error())
	}
	h := &hook{cfg: cfg, in: in}
	if in.HookEventName == PostToolUse {
		if cfgErr != nil {
			return postBlock("approvals could not record this call's outcome: " + cfgErr.Error())
		}
		return h.post(ctx)
	}
	if cfgErr != nil {
		return deny("approvals: " + cfgErr.Error())
	}
	return h.pre(ctx)
}

func readInput(r io.Reader) (*Input, error) {
	b, err := io.ReadAll(io.LimitReader(r, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read the hook input from stdin: %w", err)
	}
	var in Input
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("stdin is not a Claude Code hook input (a JSON object): %v", err)
	}
	switch {
	case in.HookEventName != PreToolUse && in.HookEventName != PostToolUse:
		return nil, fmt.Errorf("hook_event_name %q: this hook answers PreToolUse and PostToolUse", in.HookEventName)
	case in.ToolName == "":
		return nil, errors.New("the hook input has no tool_name")
	case in.SessionID == "":
		return nil, errors.New("the hook input has no session_id")
	case len(in.ToolInput) == 0 || in.ToolInput[0] != '{':
		return nil, errors.New("the hook input's tool_input is not a JSON object")
	}
	return &in, nil
}

// hook is one invocation.
type hook struct {
	cfg Config
	in  *Input
}

func (h *hook) now() time.Time {
	if h.cfg.Now != nil {
		return h.cfg.Now()
	}
	return time.Now()
}

func (h *hook) tool() string { return ToolPrefix + h.in.ToolName }

// payload is what approvals stores and a person reviews: the tool's input,
// where it runs and in which session.
func (h *hook) payload() map[string]any {
	return map[string]any{"tool_input": h.in.ToolInput, "cwd": h.in.Cwd, "session_id": h.in.SessionID}
}

// defaultKey names this one tool call: Claude Code gives every call its own
// tool_use_id, so nothing but this call can ever use it.
func (h *hook) defaultKey() (string, error) {
	if h.in.ToolUseID == "" {
		return "", errors.New("the hook input has no tool_use_id, and the tools file gives " + h.tool() + " no intent template")
	}
	return ToolPrefix + h.in.SessionID + ":" + h.in.ToolUseID, nil
}

func (h *hook) actionURL(id string) string { return h.cfg.URL + "/actions/" + id }

func (h *hook) describe(a *action) string {
	return fmt.Sprintf("action %s (%s, intent %q; %s)", a.ID, a.Tool, a.IntentKey, h.actionURL(a.ID))
}

// client returns the HTTP client.
func (h *hook) client() *http.Client {
	if h.cfg.Client != nil {
		return h.cfg.Client
	}
	return http.DefaultClient
}

// request sends one REST call with a deadline of its own and decodes the
// answer into into (an action, a list, the registry); a problem answer
// becomes a *problem error.
func (h *hook) request(ctx context.Context, method, path string, body any, timeout time.Duration, into any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.cfg.URL+path, rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+h.cfg.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := h.client().Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the approvals server at %s: %w", h.cfg.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 32<<20))
	if err != nil {
		return res.StatusCode, fmt.Errorf("read the answer to %s %s: %w", method, path, err)
	}
	if res.StatusCode >= 300 {
		p := &problem{Status: res.StatusCode}
		if json.Unmarshal(b, p) != nil || p.Code == "" {
			p.Code, p.Detail = "http_"+fmt.Sprint(res.StatusCode), strings.TrimSpace(string(b))
		}
		return res.StatusCode, p
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			return res.StatusCode, fmt.Errorf("the answer to %s %s is not what the API documents: %w", method, path, err)
		}
	}
	return res.StatusCode, nil
}

// problem is an RFC 9457 problem details answer.
type problem struct {
	Status int     `json:"status"`
	Code   string  `json:"code"`
	Detail string  `json:"detail"`
	Action *action `json:"action"`
}

func (p *problem) Error() string {
	if p.Detail == "" {
		return fmt.Sprintf("approvals answered %d %s", p.Status, p.Code)
	}
	return fmt.Sprintf("approvals answered %d %s: %s", p.Status, p.Code, p.Detail)
}

// action is the part of the API's action the hook reads.
type action struct {
	ID           string `json:"id"`
	Tool         string `json:"tool"`
	Class        string `json:"class"`
	IntentKey    string `json:"intent_key"`
	State        string `json:"state"`
	DecidedBy    string `json:"decided_by"`
	DecisionNote string `json:"decision_note"`
	RequestedBy  string `json:"requested_by"`
}

// toolInfo is the registry entry of a tool (GET /api/v1/tools).
type toolInfo struct {
	Name   string `json:"name"`
	Class  string `json:"class"`
	Intent string `json:"intent"`
}

const shortTimeout = 30 * time.Second

// lookup returns the registry entry of the hook's tool; a tool the file does
// not list is at-most-once without a template, as the server treats it.
func (h *hook) lookup(ctx context.Context) (toolInfo, error) {
	var reg struct {
		Tools []toolInfo `json:"tools"`
	}
	if _, err := h.request(ctx, http.MethodGet, "/api/v1/tools", nil, shortTimeout, &reg); err != nil {
		return toolInfo{}, err
	}
	for _, t := range reg.Tools {
		if t.Name == h.tool() {
			return t, nil
		}
	}
	return toolInfo{Name: h.tool(), Class: "at-most-once"}, nil
}
