package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The command reads its settings from the environment, and a missing or
// unusable one is a deny on stdout (exit 0), never a failure Claude Code
// could read as permission.
func TestHookCommandDeniesWithoutItsSettings(t *testing.T) {
	t.Setenv("APPROVALS_URL", "")
	t.Setenv("APPROVALS_TOKEN", "")
	var stdout, stderr bytes.Buffer
	in := `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t1"}`
	if code := run(context.Background(), []string{"hook", "claude-code"}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d (%s), want 0", code, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, `"permissionDecision":"deny"`) || !strings.Contains(out, "APPROVALS_URL is not set") {
		t.Fatalf("stdout %q; want a deny naming APPROVALS_URL", out)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"hook", "cursor"}, strings.NewReader(in), &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "approvals hook claude-code") {
		t.Fatalf("hook cursor: exit %d, stderr %q; want 1 with the usage", code, stderr.String())
	}
}
