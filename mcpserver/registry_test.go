package mcpserver_test

import (
	"context"
	"testing"

	"github.com/approvals/approvals/classify"
)

// The tools follow the service's registry: when the gateway re-imports an
// upstream's tools, a new session lists the new ones and can call them.
func TestToolsFollowTheRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	tok := e.token(t, "bot")
	names := func() map[string]bool { return toolNames(t, e, tok) }
	if names()["added_later"] {
		t.Fatal("added_later listed before it was added")
	}
	reg, err := classify.Parse([]byte(toolsYAML+`
  added_later:
    annotations: { idempotentHint: true }
`), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.app.Tools.Store(reg)
	if !names()["added_later"] {
		t.Fatal("added_later not listed after the registry changed")
	}
	cs := e.connect(t, tok)
	defer cs.Close()
	wantAction(t, call(t, cs, "added_later", map[string]any{"x": 1}), "recorded")
}

// A tool named for the Claude Code hook (claude-code:Bash) is no MCP tool
// name: the MCP face leaves it out and lists the others.
func TestToolsWithAColonAreNotOffered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	reg, err := classify.Parse([]byte(toolsYAML+`
  claude-code:Bash:
    class: at-most-once
`), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.app.Tools.Store(reg)
	got := toolNames(t, e, e.token(t, "bot"))
	if got["claude-code:Bash"] || !got["issue_refund"] {
		t.Fatalf("tools = %v; want issue_refund without claude-code:Bash", got)
	}
}

// toolNames lists the tools a new session of the token sees.
func toolNames(t *testing.T, e *env, tok string) map[string]bool {
	t.Helper()
	cs := e.connect(t, tok)
	defer cs.Close()
	got := map[string]bool{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		got[tool.Name] = true
	}
	return got
}
