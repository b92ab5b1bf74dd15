package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryCommandAnswersHelp: every command and subcommand prints its own
// usage and exits 0 on --help (and -h, -help), without doing anything: no
// server started, no file opened, no database touched (DATABASE_URL points
// nowhere usable).
func TestEveryCommandAnswersHelp(t *testing.T) {
	t.Setenv("DATABASE_URL", "sqlite:"+filepath.Join(t.TempDir(), "missing", "dir", "approvals.db"))
	cases := []struct {
		args []string
		want string // a line of the usage printed
	}{
		{[]string{"serve"}, "approvals serve"},
		{[]string{"migrate"}, "approvals migrate"},
		{[]string{"user"}, "approvals user add --email E --role R"},
		{[]string{"user", "add"}, "approvals user add --email E --role R"},
		{[]string{"user", "add", "--email", "a@example.com"}, "approvals user add"},
		{[]string{"token"}, "approvals token create --name NAME"},
		{[]string{"token", "create"}, "approvals token create --name NAME"},
		{[]string{"token", "revoke"}, "approvals token revoke --name NAME"},
		{[]string{"tools", "check"}, "approvals tools check [FILE]"},
		{[]string{"tools", "check", "tools.yaml"}, "approvals tools check [FILE]"},
		{[]string{"telegram", "set-webhook"}, "approvals telegram set-webhook"},
		{[]string{"audit"}, "approvals audit keygen"},
		{[]string{"audit", "keygen"}, "approvals audit keygen"},
		{[]string{"audit", "export"}, "approvals audit export [--since SEQ] [--out FILE]"},
		{[]string{"audit", "verify"}, "approvals audit verify [FILE --public-key KEY"},
		{[]string{"policy", "test"}, "approvals policy test [--since 720h] FILE"},
		{[]string{"verify", "test"}, "approvals verify test FILE ACTION_ID…"},
		{[]string{"hook", "claude-code"}, "approvals hook claude-code"},
	}
	for _, c := range cases {
		for _, flag := range []string{"--help", "-h", "-help"} {
			args := append(append([]string{}, c.args...), flag)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var out, errOut strings.Builder
				code := run(t.Context(), args, strings.NewReader(""), &out, &errOut)
				if code != 0 || errOut.Len() != 0 {
					t.Fatalf("exit %d, stderr %q", code, errOut.String())
				}
				if !strings.HasPrefix(out.String(), "usage: approvals "+c.args[0]) || !strings.Contains(out.String(), c.want) {
					t.Fatalf("stdout %q lacks %q", out.String(), c.want)
				}
				if strings.Contains(out.String(), "approvals "+otherCommand(c.args[0])) {
					t.Fatalf("stdout %q is not %s's own usage", out.String(), c.args[0])
				}
			})
		}
	}
	if _, err := os.Stat("--help"); err == nil {
		t.Fatal("a file named --help was created")
	}
}

func otherCommand(cmd string) string {
	if cmd == "migrate" {
		return "serve"
	}
	return "migrate"
}

// TestHelpCommandNamesACommand: `approvals help tools` is tools' usage,
// `approvals --help` and `approvals help` the whole usage.
func TestHelpCommandNamesACommand(t *testing.T) {
	for args, want := range map[string]string{"help tools": "approvals tools check", "--help": "commands:", "help": "commands:"} {
		var out, errOut strings.Builder
		if code := run(t.Context(), strings.Fields(args), strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), want) {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
}

// TestServeHelpShowsConfiguration: serve's usage carries the environment it reads.
func TestServeHelpShowsConfiguration(t *testing.T) {
	got := commandUsage("serve")
	if !strings.Contains(got, "DATABASE_URL") || strings.Contains(got, "token create") {
		t.Fatalf("serve usage %q", got)
	}
}
