package claudecode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/claudecode"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

const toolsYAML = `
tools:
  claude-code:Bash:
    class: at-most-once
    description: A shell command Claude Code wants to run.
    preview: { title: "{tool_input.command}", cwd: "{cwd}" }
  claude-code:Write:
    class: at-most-once
    intent: "write:{session_id}:{tool_input.file_path}"
  claude-code:Deploy:
    class: exactly-once
    intent: "deploy:{tool_input.target}"
  claude-code:Read:
    annotations: { readOnlyHint: true }
`

type env struct {
	app   *apptest.App
	token string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	reg, err := classify.Parse([]byte(toolsYAML), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, apptest.Options{SQLite: true, Tools: reg})
	return &env{app: a, token: a.Token(t, "claude")}
}

func (e *env) config(wait time.Duration) claudecode.Config {
	return claudecode.Config{URL: e.app.URL, Token: e.token, Wait: wait}
}

// input is a hook input as Claude Code writes it.
func input(event, tool, toolUseID string, toolInput map[string]any) map[string]any {
	return map[string]any{
		"session_id": "sess-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/home/ann/repo",
		"permission_mode": "default", "hook_event_name": event, "tool_name": tool,
		"tool_input": toolInput, "tool_use_id": toolUseID,
	}
}

type output struct {
	Decision           string `json:"decision"`
	Reason             string `json:"reason"`
	HookSpecificOutput struct {
		HookEventName            string `json:"hookEventName"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
		AdditionalContext        string `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

func runHook(t *testing.T, cfg claudecode.Config, cfgErr error, stdin []byte) output {
	t.Helper()
	var out bytes.Buffer
	if err := claudecode.Run(context.Background(), cfg, cfgErr, bytes.NewReader(stdin), &out); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var o output
	if err := json.Unmarshal(out.Bytes(), &o); err != nil {
		t.Fatalf("hook output %q is not JSON: %v", out.String(), err)
	}
	return o
}

func hook(t *testing.T, cfg claudecode.Config, in map[string]any) output {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return runHook(t, cfg, nil, b)
}

func wantPre(t *testing.T, o output, decision, reasonHas string) {
	t.Helper()
	h := o.HookSpecificOutput
	if h.HookEventName != "PreToolUse" || h.PermissionDecision != decision || !strings.Contains(h.PermissionDecisionReason, reasonHas) {
		t.Fatalf("hook output %+v; want PreToolUse %s with a reason containing %q", h, decision, reasonHas)
	}
}

// actions lists the actions of a tool through the REST API.
func (e *env) actions(t *testing.T, tool string) []*queue.Action {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.app.URL+"/api/v1/actions?"+url.Values{"tool": {tool}}.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct {
		Actions []*queue.Action `json:"actions"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Actions
}

func (e *env) only(t *testing.T, tool string) *queue.Action {
	t.Helper()
	list := e.actions(t, tool)
	if len(list) != 1 {
		t.Fatalf("%d actions of %s, want 1", len(list), tool)
	}
	return list[0]
}

// decideWhilePending runs the PreToolUse hook and decides its action once
// the hook is waiting for it.
func (e *env) decideWhilePending(t *testing.T, in map[string]any, decide func(id string)) output {
	t.Helper()
	done := make(chan output, 1)
	go func() { done <- hook(t, e.config(time.Minute), in) }()
	e.app.AwaitWaiters(t, 1)
	decide(e.only(t, "claude-code:"+in["tool_name"].(string)).ID)
	select {
	case o := <-done:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("the hook did not answer within 30s of the decision")
		return output{}
	}
}

func TestBashWaitsForApprovalThenPostToolUseCompletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := input("PreToolUse", "Bash", "toolu_01", map[string]any{"command": "git push origin main", "description": "Push"})
	o := e.decideWhilePending(t, pre, func(id string) {
		if _, err := e.app.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: id, By: "user:ann@example.com", Note: "ship it"}); err != nil {
			t.Fatal(err)
		}
	})
	wantPre(t, o, "allow", "approved by user:ann@example.com: ship it")
	a := e.only(t, "claude-code:Bash")
	if a.State != queue.StateInProgress || a.IntentKey != "claude-code:sess-1:toolu_01" {
		t.Fatalf("after allow: state %s, key %q; want in_progress (claimed before allow) with the hook's own key", a.State, a.IntentKey)
	}
	var payload map[string]any
	if err := json.Unmarshal(a.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	if payload["cwd"] != "/home/ann/repo" || payload["session_id"] != "sess-1" || payload["tool_input"].(map[string]any)["command"] != "git push origin main" {
		t.Fatalf("payload = %v; want tool_input, cwd and session_id", payload)
	}

	post := input("PostToolUse", "Bash", "toolu_01", pre["tool_input"].(map[string]any))
	post["tool_response"] = map[string]any{"stdout": "Everything up-to-date", "stderr": "", "interrupted": false}
	o = hook(t, e.config(time.Minute), post)
	if o.HookSpecificOutput.HookEventName != "PostToolUse" || o.Decision != "" || !strings.Contains(o.HookSpecificOutput.AdditionalContext, "is done") {
		t.Fatalf("PostToolUse output %+v; want context saying the action is done", o)
	}
	a = e.only(t, "claude-code:Bash")
	if a.State != queue.StateDone || !strings.Contains(string(a.Result), "Everything up-to-date") {
		t.Fatalf("after PostToolUse: state %s, result %s; want done with the tool_response", a.State, a.Result)
	}
}

func TestBashRejectedDeniesWithTheNote(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := input("PreToolUse", "Bash", "toolu_02", map[string]any{"command": "rm -rf build"})
	o := e.decideWhilePending(t, pre, func(id string) {
		if _, err := e.app.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateRejected, ID: id, By: "user:ann@example.com", Note: "use make clean"}); err != nil {
			t.Fatal(err)
		}
	})
	wantPre(t, o, "deny", "user:ann@example.com rejected this call: use make clean")
}

func TestBashChangesRequestedDeniesWithTheNote(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := input("PreToolUse", "Bash", "toolu_03", map[string]any{"command": "git push --force"})
	o := e.decideWhilePending(t, pre, func(id string) {
		if _, err := e.app.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateChangesRequested, ID: id, By: "user:ann@example.com", Note: "no --force"}); err != nil {
			t.Fatal(err)
		}
	})
	wantPre(t, o, "deny", "asked for changes: no --force")
}

// Nobody decides in time: deny, and withdraw the action, since its key
// (the tool use's own) can never be used by another call.
func TestStillPendingAtTheDeadlineDeniesAndWithdraws(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := hook(t, e.config(1500*time.Millisecond), input("PreToolUse", "Bash", "toolu_04", map[string]any{"command": "make deploy"}))
	wantPre(t, o, "deny", "nobody decided")
	wantPre(t, o, "deny", "withdrawn")
	if a := e.only(t, "claude-code:Bash"); a.State != queue.StateCancelled {
		t.Fatalf("state %s, want cancelled", a.State)
	}
}

// With the tools file's template the key names the business fact: the
// action stays pending at the deadline, and the same call made again after
// the approval is claimed and allowed.
func TestTemplateKeyKeepsThePendingDecisionForTheNextCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tin := map[string]any{"file_path": "/home/ann/repo/.env", "content": "X=1"}
	o := hook(t, e.config(time.Second), input("PreToolUse", "Write", "toolu_05", tin))
	wantPre(t, o, "deny", "stays pending")
	a := e.only(t, "claude-code:Write")
	if a.State != queue.StatePending || a.IntentKey != "write:sess-1:/home/ann/repo/.env" {
		t.Fatalf("state %s, key %q; want pending under the template's key", a.State, a.IntentKey)
	}
	if _, err := e.app.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	wantPre(t, hook(t, e.config(time.Second), input("PreToolUse", "Write", "toolu_06", tin)), "allow", "approved by user:ann@example.com")
	post := input("PostToolUse", "Write", "toolu_06", tin)
	post["tool_response"] = map[string]any{"filePath": "/home/ann/repo/.env", "success": true}
	if o := hook(t, e.config(time.Second), post); !strings.Contains(o.HookSpecificOutput.AdditionalContext, "is done") {
		t.Fatalf("PostToolUse output %+v; want done", o)
	}
	// Once executed, the same call again is denied: it was done.
	wantPre(t, hook(t, e.config(time.Second), input("PreToolUse", "Write", "toolu_07", tin)), "deny", "already done")
}

func TestExactlyOnceToolClaimsOnceAndNeverTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tin := map[string]any{"target": "production"}
	wantPre(t, hook(t, e.config(time.Second), input("PreToolUse", "Deploy", "toolu_10", tin)), "allow", "holds the claim")
	// A second call of the same intent while the first runs: 409
	// in_progress is never permission.
	wantPre(t, hook(t, e.config(time.Second), input("PreToolUse", "Deploy", "toolu_11", tin)), "deny", "being performed right now")
	post := input("PostToolUse", "Deploy", "toolu_10", tin)
	post["tool_response"] = "deployed v42"
	hook(t, e.config(time.Second), post)
	a := e.only(t, "claude-code:Deploy")
	if a.State != queue.StateDone || string(a.Result) != `"deployed v42"` {
		t.Fatalf("state %s, result %s; want done with the tool_response", a.State, a.Result)
	}
	wantPre(t, hook(t, e.config(time.Second), input("PreToolUse", "Deploy", "toolu_12", tin)), "deny", "already done")
}

func TestReadOnlyToolIsAllowedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tin := map[string]any{"file_path": "/home/ann/repo/go.mod"}
	start := time.Now()
	wantPre(t, hook(t, e.config(time.Hour), input("PreToolUse", "Read", "toolu_20", tin)), "allow", "at-least-once")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("at-least-once answered after %s; want at once", d)
	}
	if a := e.only(t, "claude-code:Read"); a.State != queue.StateRecorded {
		t.Fatalf("state %s, want recorded", a.State)
	}
	post := input("PostToolUse", "Read", "toolu_20", tin)
	post["tool_response"] = map[string]any{"content": "module x"}
	if o := hook(t, e.config(time.Hour), post); o.Decision != "" || o.HookSpecificOutput.HookEventName != "" {
		t.Fatalf("PostToolUse of an at-least-once tool answered %+v; want nothing", o)
	}
}

// A tool the file does not list is at-most-once, as on the server.
func TestUnlistedToolWaitsForAPerson(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pre := input("PreToolUse", "mcp__github__create_issue", "toolu_30", map[string]any{"title": "bug"})
	o := e.decideWhilePending(t, pre, func(id string) {
		if _, err := e.app.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: id, By: "user:ann@example.com"}); err != nil {
			t.Fatal(err)
		}
	})
	wantPre(t, o, "allow", "approved")
}

// Whatever stops the hook from hearing approvals denies: never allow.
func TestFailsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	_ = ln.Close()
	good := input("PreToolUse", "Bash", "toolu_40", map[string]any{"command": "ls"})
	mustJSON := func(v any) []byte { b, _ := json.Marshal(v); return b }
	noSession := input("PreToolUse", "Bash", "toolu_41", map[string]any{"command": "ls"})
	delete(noSession, "session_id")
	badInput := input("PreToolUse", "Bash", "toolu_42", nil)
	badInput["tool_input"] = "ls"
	otherEvent := input("PermissionRequest", "Bash", "toolu_43", map[string]any{"command": "ls"})
	tests := []struct {
		name      string
		cfg       claudecode.Config
		cfgErr    error
		stdin     []byte
		reasonHas string
	}{
		{"server unreachable", claudecode.Config{URL: dead, Token: e.token, Wait: time.Minute}, nil, mustJSON(good), "cannot reach the approvals server"},
		{"token refused", claudecode.Config{URL: e.app.URL, Token: "apv_not-a-token", Wait: time.Minute}, nil, mustJSON(good), "401 unauthorized"},
		{"setting missing", claudecode.Config{}, errSetting, mustJSON(good), "APPROVALS_URL is not set"},
		{"stdin not JSON", e.config(time.Minute), nil, []byte("PreToolUse Bash ls"), "not a Claude Code hook input"},
		{"stdin empty", e.config(time.Minute), nil, nil, "not a Claude Code hook input"},
		{"no session_id", e.config(time.Minute), nil, mustJSON(noSession), "no session_id"},
		{"tool_input not an object", e.config(time.Minute), nil, mustJSON(badInput), "tool_input is not a JSON object"},
		{"another event", e.config(time.Minute), nil, mustJSON(otherEvent), `hook_event_name "PermissionRequest"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantPre(t, runHook(t, tt.cfg, tt.cfgErr, tt.stdin), "deny", tt.reasonHas)
		})
	}
	if list := e.actions(t, "claude-code:Bash"); len(list) != 0 {
		t.Fatalf("%d actions submitted by refused calls, want none", len(list))
	}
}

var errSetting = func() error {
	_, err := claudecode.ConfigFromEnv(func(string) string { return "" })
	return err
}()

func TestPostToolUseThatCannotReportBlocks(t *testing.T) {
	t.Parallel()
	post := input("PostToolUse", "Bash", "toolu_50", map[string]any{"command": "ls"})
	post["tool_response"] = "x"
	o := hook(t, claudecode.Config{URL: "http://127.0.0.1:1", Token: "t"}, post)
	if o.Decision != "block" || !strings.Contains(o.Reason, "Do not run it again") {
		t.Fatalf("output %+v; want block telling Claude not to run it again", o)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env     map[string]string
		wantErr string
		wait    time.Duration
	}{
		{map[string]string{"APPROVALS_URL": "http://a:8080/", "APPROVALS_TOKEN": "apv_x"}, "", 10 * time.Minute},
		{map[string]string{"APPROVALS_URL": "http://a", "APPROVALS_TOKEN": "apv_x", "APPROVALS_HOOK_WAIT": "90s"}, "", 90 * time.Second},
		{map[string]string{"APPROVALS_URL": "http://a", "APPROVALS_TOKEN": "apv_x", "APPROVALS_HOOK_WAIT": "soon"}, "APPROVALS_HOOK_WAIT", 0},
		{map[string]string{"APPROVALS_URL": "a:8080", "APPROVALS_TOKEN": "apv_x"}, "APPROVALS_URL", 0},
		{map[string]string{"APPROVALS_URL": "http://a"}, "APPROVALS_TOKEN is not set", 0},
	}
	for _, tt := range tests {
		c, err := claudecode.ConfigFromEnv(func(k string) string { return tt.env[k] })
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: err = %v, want one naming %s", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil || c.Wait != tt.wait || strings.HasSuffix(c.URL, "/") {
			t.Errorf("%v: %+v, %v; want wait %s and no trailing slash", tt.env, c, err, tt.wait)
		}
	}
}
