package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/telegram/telegramtest"
)

func TestParseServeConfigRefuses(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tc := range []struct {
		name, env, value string
		args             []string
		want             string
	}{
		{"unreadable secret file", "APPROVALS_WEBHOOK_SECRET_FILE", missing, nil, "APPROVALS_WEBHOOK_SECRET_FILE"},
		{"public pprof address", "APPROVALS_PPROF_ADDR", "0.0.0.0:6060", nil, "APPROVALS_PPROF_ADDR"},
		{"stray argument", "", "", []string{"extra"}, `unexpected argument "extra"`},
		{"whsec_ secret that is not base64", "APPROVALS_WEBHOOK_SECRET", "whsec_not base64!", nil, "APPROVALS_WEBHOOK_SECRET"},
		{"bad sweep interval", "APPROVALS_SWEEP_INTERVAL", "soon", nil, "APPROVALS_SWEEP_INTERVAL"},
		{"audit lease not a duration", "APPROVALS_AUDIT_LEASE", "long", nil, "APPROVALS_AUDIT_LEASE"},
		{"audit lease under a second", "APPROVALS_AUDIT_LEASE", "500ms", nil, "APPROVALS_AUDIT_LEASE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, tc.value)
			}
			_, err := parseServeConfig(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want one naming %s", err, tc.want)
			}
		})
	}
}

func TestSecretFromFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("APPROVALS_WEBHOOK_SECRET_FILE", f)
	c, err := parseServeConfig(nil)
	if err != nil || c.WebhookSecret != "s3cret" {
		t.Fatalf("secret %q, err %v", c.WebhookSecret, err)
	}
}

func TestHelpExitsZero(t *testing.T) {
	var out, errOut strings.Builder
	if code := run(t.Context(), []string{"token", "create", "-h"}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), "usage: approvals") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// TestToolsCheck: a valid file lists its tools and exits 0; a second file
// is refused (it would go unchecked), and so is an invalid file.
func TestToolsCheck(t *testing.T) {
	t.Setenv("APPROVALS_WEBHOOK_SECRET", "")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("tools:\n  x:\n    class: sometimes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tools", "check", "../../tools.example.yaml"}, 0, "issue_refund"},
		{[]string{"tools", "check", "../../tools.example.yaml", bad}, 1, "unexpected argument"},
		{[]string{"tools", "check", bad}, 1, "sometimes"},
	} {
		var out, errOut strings.Builder
		code := run(t.Context(), tc.args, strings.NewReader(""), &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d mentioning %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.want)
		}
	}
}

// A channel whose settings are missing fails tools check and startup naming
// the channel; the Slack secrets may come from NAME_FILE.
func TestChannelSettingsJudgeTheToolsFile(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(tools, []byte("channels:\n  team-slack: { slack: { channel: C0TEAM } }\n  leads-mail: { email: { to: [leads@example.com] } }\ntools:\n  post:\n    class: at-most-once\n    intent: \"p:{id}\"\n    approval: { notify: [team-slack, leads-mail] }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err := toolsCmd(t.Context(), []string{"check", tools}, &out)
	if err == nil || !strings.Contains(err.Error(), "team-slack") || !strings.Contains(err.Error(), "APPROVALS_SLACK_BOT_TOKEN") ||
		!strings.Contains(err.Error(), "leads-mail") || !strings.Contains(err.Error(), "APPROVALS_SMTP_URL") {
		t.Fatalf("tools check without channel settings: %v; want errors naming both channels and their settings", err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("xoxb-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("APPROVALS_SLACK_BOT_TOKEN_FILE", token)
	t.Setenv("APPROVALS_SLACK_SIGNING_SECRET", "signing")
	t.Setenv("APPROVALS_SMTP_URL", "smtp://127.0.0.1:2525")
	t.Setenv("APPROVALS_SMTP_FROM", "approvals@example.com")
	t.Setenv("APPROVALS_PUBLIC_URL", "https://approvals.example.com/")
	if err := toolsCmd(t.Context(), []string{"check", tools}, &out); err != nil {
		t.Fatalf("tools check with the settings: %v", err)
	}
	c, err := parseServeConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Channels.SlackBotToken != "xoxb-from-file" || c.PublicURL != "https://approvals.example.com" {
		t.Fatalf("settings %+v, public URL %q", c.Channels, c.PublicURL)
	}
	t.Setenv("APPROVALS_PUBLIC_URL", "approvals.example.com")
	if _, err := parseServeConfig(nil); err == nil || !strings.Contains(err.Error(), "APPROVALS_PUBLIC_URL") {
		t.Fatalf("a public URL without scheme: %v", err)
	}
}

// user add --slack-id maps decisions made in Slack to the user; a malformed
// id or one another user has is refused, naming the flag and the id, and
// then nothing is created or changed: on PostgreSQL and on SQLite.
func TestUserAddSlackID(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			db := "sqlite:" + filepath.Join(t.TempDir(), "approvals.db")
			if store == "postgres" {
				db = pgtest.URL(t)
			}
			add := func(email, slackID string, extra ...string) (int, string) {
				var out, errOut strings.Builder
				args := append([]string{"user", "add", "--database-url", db, "--email", email, "--role", "approver", "--slack-id", slackID}, extra...)
				code := run(t.Context(), args, strings.NewReader("correct horse battery staple\n"), &out, &errOut)
				return code, errOut.String()
			}
			if code, msg := add("ann@example.com", "U0ANN"); code != 0 {
				t.Fatalf("user add --slack-id: %d %s", code, msg)
			}
			if code, msg := add("bob@example.com", "bob"); code == 0 || !strings.Contains(msg, "--slack-id") {
				t.Fatalf("malformed Slack id: %d %q", code, msg)
			}
			if code, msg := add("bob@example.com", "U0ANN"); code == 0 || !strings.Contains(msg, "--slack-id U0ANN belongs to another user") ||
				!strings.Contains(msg, "not created") {
				t.Fatalf("Slack id of another user: %d %q", code, msg)
			}
			if code, msg := add("cara@example.com", "U0CARA"); code != 0 {
				t.Fatalf("user add cara: %d %s", code, msg)
			}
			// Re-running user add --update for a user who has that Slack id
			// already updates them (SQLite reports the Slack id index first;
			// the store still answers ErrExists).
			if code, msg := add("ann@example.com", "U0ANN", "--update"); code != 0 {
				t.Fatalf("user add --update re-run with the user's own Slack id: %d %q", code, msg)
			}
			st, _, err := app.OpenStore(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cara, err := st.UserGetByEmail(t.Context(), "cara@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if code, msg := add("cara@example.com", "U0ANN", "--update"); code == 0 || !strings.Contains(msg, "--slack-id U0ANN belongs to another user") {
				t.Fatalf("update to the Slack id of another user: %d %q", code, msg)
			}
			if _, err := st.UserGetByEmail(t.Context(), "bob@example.com"); !errors.Is(err, accounts.ErrNotFound) {
				t.Fatalf("bob was created by the refused user add: %v", err)
			}
			if u, err := st.UserGetBySlackID(t.Context(), "U0ANN"); err != nil || u.Email != "ann@example.com" {
				t.Fatalf("U0ANN: %v %v", u, err)
			}
			after, err := st.UserGetByEmail(t.Context(), "cara@example.com")
			if err != nil || after.SlackID != "U0CARA" || after.PasswordHash != cara.PasswordHash || after.Role != cara.Role {
				t.Fatalf("the refused update changed cara: %+v -> %+v (%v)", cara, after, err)
			}
		})
	}
}

// The channels of section 17 are judged the same way: a Telegram channel without the bot
// token and secret, a PagerDuty routing key whose variable is unset, a Teams webhook that is
// not a URL fail tools check naming the channel (never the Teams URL, a credential); a
// malformed Telegram secret fails the settings.
func TestNewChannelSettingsJudgeTheToolsFile(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(tools, []byte(`channels:
  team-telegram: { telegram: { chat_id: "-100123" } }
  pager: { pagerduty: { routing_key: "${PD_TEST_KEY}" }, events: [ticket.opened] }
  team-teams: { teams: { webhook: "not a url/workflows/SECRETPATH" } }
tools:
  post:
    class: at-most-once
    intent: "p:{id}"
    approval: { notify: [team-telegram, team-teams], escalate_after: 1h, escalate_notify: [pager] }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err := toolsCmd(t.Context(), []string{"check", tools}, &out)
	if err == nil {
		t.Fatal("tools check without the channels' settings passed")
	}
	for _, want := range []string{`channel "team-telegram"`, "APPROVALS_TELEGRAM_BOT_TOKEN", `channel "pager"`, "PD_TEST_KEY is not set",
		`channel "team-teams"`, "teams.webhook"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("tools check: %v\nlacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "SECRETPATH") {
		t.Errorf("tools check shows the Teams webhook: %v", err)
	}
	if err := os.WriteFile(tools, []byte(`channels:
  team-telegram: { telegram: { chat_id: "-100123" } }
  pager: { pagerduty: { routing_key: "${PD_TEST_KEY}" }, events: [ticket.opened] }
  team-teams: { teams: { webhook: "https://prod-01.westus.logic.azure.com/workflows/SECRETPATH" } }
tools:
  post:
    class: at-most-once
    intent: "p:{id}"
    approval: { notify: [team-telegram, team-teams], escalate_after: 1h, escalate_notify: [pager] }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("APPROVALS_TELEGRAM_BOT_TOKEN", "7001234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0")
	t.Setenv("APPROVALS_TELEGRAM_SECRET", "a-secret_1")
	t.Setenv("PD_TEST_KEY", "R0UTINGKEY0123456789abcdefABCDEF")
	if err := toolsCmd(t.Context(), []string{"check", tools}, &out); err != nil {
		t.Fatalf("tools check with the settings: %v", err)
	}
	t.Setenv("APPROVALS_TELEGRAM_SECRET", "not allowed: spaces")
	if _, err := parseServeConfig(nil); err == nil || !strings.Contains(err.Error(), "APPROVALS_TELEGRAM_SECRET") {
		t.Fatalf("a malformed Telegram secret: %v", err)
	}
}

// approvals telegram set-webhook registers {APPROVALS_PUBLIC_URL}/integrations/telegram/webhook
// with the secret (a Bot API started by the test); without the settings it says which.
func TestTelegramSetWebhook(t *testing.T) {
	const token = "7001234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"
	bot := telegramtest.New(t, token)
	var out, errOut strings.Builder
	if code := run(t.Context(), []string{"telegram", "set-webhook"}, strings.NewReader(""), &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "APPROVALS_TELEGRAM_BOT_TOKEN") {
		t.Fatalf("without settings: exit %d, %q", code, errOut.String())
	}
	t.Setenv("APPROVALS_TELEGRAM_BOT_TOKEN", token)
	t.Setenv("APPROVALS_TELEGRAM_SECRET", "the-secret_1")
	t.Setenv("APPROVALS_TELEGRAM_API_URL", bot.URL)
	t.Setenv("APPROVALS_PUBLIC_URL", "https://approvals.example.com/")
	out.Reset()
	errOut.Reset()
	if code := run(t.Context(), []string{"telegram", "set-webhook"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("set-webhook: exit %d, %q", code, errOut.String())
	}
	calls := bot.Calls("setWebhook")
	if len(calls) != 1 || calls[0].Params["url"] != "https://approvals.example.com/integrations/telegram/webhook" || calls[0].Params["secret_token"] != "the-secret_1" {
		t.Fatalf("setWebhook calls %+v", calls)
	}
	if !strings.Contains(out.String(), "https://approvals.example.com/integrations/telegram/webhook") {
		t.Fatalf("output %q", out.String())
	}
	bot.FailNext("setWebhook", telegramtest.Failure{Code: 400, Description: "Bad Request: bad webhook: HTTPS url must be provided for webhook"})
	if code := run(t.Context(), []string{"telegram", "set-webhook"}, strings.NewReader(""), &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "HTTPS url must be provided") || strings.Contains(errOut.String(), token) {
		t.Fatalf("a refused setWebhook: exit %d, %q", code, errOut.String())
	}
}

// The single sign-on settings: refused with a message naming the setting,
// the client secret from a file, the defaults.
func TestParseSSOSettings(t *testing.T) {
	base := map[string]string{"APPROVALS_OIDC_ISSUER": "https://login.example.com", "APPROVALS_OIDC_CLIENT_ID": "approvals",
		"APPROVALS_OIDC_ROLES": "approvals-admins=admin,support=approver"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"roles missing", map[string]string{"APPROVALS_OIDC_ROLES": ""}, "APPROVALS_OIDC_ROLES is required"},
		{"bad roles", map[string]string{"APPROVALS_OIDC_ROLES": "support=boss"}, "APPROVALS_OIDC_ROLES"},
		{"client id missing", map[string]string{"APPROVALS_OIDC_CLIENT_ID": ""}, "APPROVALS_OIDC_CLIENT_ID"},
		{"plain http issuer", map[string]string{"APPROVALS_OIDC_ISSUER": "http://login.example.com"}, "must be https"},
		{"bad recheck", map[string]string{"APPROVALS_OIDC_RECHECK": "soon"}, "APPROVALS_OIDC_RECHECK"},
		{"tiny recheck", map[string]string{"APPROVALS_OIDC_RECHECK": "10s"}, "at least 1m"},
		{"bad password login", map[string]string{"APPROVALS_PASSWORD_LOGIN": "no"}, "must be on or off"},
		{"scopes without openid", map[string]string{"APPROVALS_OIDC_SCOPES": "email groups"}, "must include openid"},
		{"no issuer, password off", map[string]string{"APPROVALS_OIDC_ISSUER": "", "APPROVALS_OIDC_CLIENT_ID": "", "APPROVALS_OIDC_ROLES": "",
			"APPROVALS_PASSWORD_LOGIN": "off"}, "APPROVALS_PASSWORD_LOGIN=off needs single sign-on"},
		{"no issuer, a client id", map[string]string{"APPROVALS_OIDC_ISSUER": "", "APPROVALS_OIDC_ROLES": ""}, "APPROVALS_OIDC_CLIENT_ID is set but APPROVALS_OIDC_ISSUER is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range base {
				t.Setenv(k, v)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := parseServeConfig(nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want one saying %q", err, tc.want)
			}
		})
	}

	t.Run("accepted", func(t *testing.T) {
		for k, v := range base {
			t.Setenv(k, v)
		}
		f := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(f, []byte("client-secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("APPROVALS_OIDC_CLIENT_SECRET_FILE", f)
		t.Setenv("APPROVALS_PASSWORD_LOGIN", "OFF")
		t.Setenv("APPROVALS_PUBLIC_URL", "https://approvals.example.com/")
		c, err := parseServeConfig(nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.SSO == nil || c.SSO.ClientSecret != "client-secret" || c.SSO.GroupsClaim != "" || c.SSO.Scopes != nil ||
			c.SSO.Roles.String() != "approvals-admins=admin,support=approver" || !c.PasswordLoginOff || c.SSORecheck != time.Hour {
			t.Fatalf("config %+v, SSO %+v", c, c.SSO)
		}
	})
	t.Run("off by default", func(t *testing.T) {
		c, err := parseServeConfig(nil)
		if err != nil || c.SSO != nil || c.PasswordLoginOff {
			t.Fatalf("config %+v, %v", c, err)
		}
	})
}
