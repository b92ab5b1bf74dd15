package handlers_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestWebhookCredentialsNeverShown: a webhook URL carrying a password and
// a token in its query is delivered to as written, yet the tools page, the
// action page, the audit log, the stored events, the API's tool list and
// the logs show neither.
func TestWebhookCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	const password, token = "hunter2pass", "sekrettoken"
	var (
		gotMu             sync.Mutex
		gotAuth, gotToken string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotMu.Lock()
		defer gotMu.Unlock()
		_, gotAuth, _ = r.BasicAuth()
		gotToken = r.URL.Query().Get("access_token")
		w.WriteHeader(http.StatusUnprocessableEntity) // refused: the action fails
	}))
	t.Cleanup(hook.Close)
	url := strings.Replace(hook.URL, "http://", "http://partner:"+password+"@", 1) + "/hook?access_token=" + token + "&v=1"
	reg, err := classify.Parse([]byte(fmt.Sprintf(`
tools:
  notify_partner:
    class: at-most-once
    intent: "partner:{partner}"
    claim_timeout: 1m
    executor: { webhook: %q, timeout: 5s }
`, url)), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	// Everything the process logs (the dispatcher's deliveries included)
	// goes to logs, at every level.
	var logs apptest.LogBuffer
	d := apptest.StartDashboard(t, apptest.Options{Tools: reg, WebhookSecret: "redaction-test-secret",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	d.AddUser("admin@example.com", accounts.RoleAdmin)
	ctx := t.Context()

	a := d.Submit("notify_partner", `{"partner":"acme"}`, "")
	if _, err := d.Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:admin@example.com"}); err != nil {
		t.Fatal(err)
	}
	final := d.Action(a.ID)
	for deadline := time.Now().Add(30 * time.Second); !final.State.Final(); {
		if time.Now().After(deadline) {
			t.Fatalf("action still %s", final.State)
		}
		if final, err = d.Polls.Wait(ctx, a.ID, final.State, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	gotMu.Lock()
	defer gotMu.Unlock()
	if final.State != queue.StateFailed || gotAuth != password || gotToken != token {
		t.Fatalf("state %s, delivered with password %q token %q: want failed, delivered with the credentials", final.State, gotAuth, gotToken)
	}

	admin := d.Login("admin@example.com")
	shown := map[string]string{
		"tools page":  admin.Get("/tools").Body,
		"action page": admin.Get("/actions/" + a.ID).Body,
		"audit page":  admin.Get("/audit").Body,
		"tool list":   apiTools(t, d.App),
		"logs":        logs.String(),
	}
	evs, err := d.Store.EventList(ctx, queue.EventListParams{ActionID: a.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var events strings.Builder
	for _, e := range evs {
		events.Write(e.Data)
	}
	shown["events"] = events.String()
	if !strings.Contains(shown["events"], classify.Redacted) || !strings.Contains(shown["tools page"], classify.Redacted) {
		t.Fatalf("no redacted URL in events %s or on the tools page", shown["events"])
	}
	for where, text := range shown {
		for _, secret := range []string{password, token} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s shows %s", where, secret)
			}
		}
	}
}

// apiTools is the body of GET /api/v1/tools, as an agent reads it.
func apiTools(t *testing.T, a *apptest.App) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.URL+"/api/v1/tools", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Token(t, "reader"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK || !strings.Contains(string(b), "notify_partner") {
		t.Fatalf("GET /api/v1/tools: %d %s %v", res.StatusCode, b, err)
	}
	return string(b)
}

// TestWebhookErrorCredentialsNeverShown: when no answer arrives (the
// receiver is down), Go's error names the URL, query token included; the
// delivery event and the logs show it redacted.
func TestWebhookErrorCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	const password, token = "hunter2pass", "sekrettoken"
	// A port nobody listens on any more: the delivery is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	url := "http://partner:" + password + "@" + addr + "/hook?access_token=" + token + "&v=1"
	reg, err := classify.Parse([]byte(fmt.Sprintf(`
tools:
  notify_partner:
    class: at-most-once
    intent: "partner:{partner}"
    claim_timeout: 1m
    executor: { webhook: %q, timeout: 5s }
`, url)), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	var logs apptest.LogBuffer
	d := apptest.StartDashboard(t, apptest.Options{Tools: reg, WebhookSecret: "redaction-test-secret",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	a := d.Submit("notify_partner", `{"partner":"acme"}`, "")
	if _, err := d.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:admin@example.com"}); err != nil {
		t.Fatal(err)
	}
	// The outcome is unknown: the action stays in_progress, so no state
	// change says when the delivery is recorded; its event does.
	var evs []queue.Event
	for deadline := time.Now().Add(30 * time.Second); len(evs) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no delivery_result event after 30s")
		}
		if evs, err = d.Store.EventList(t.Context(), queue.EventListParams{ActionID: a.ID, Kind: queue.EventDeliveryResult, Limit: 10}); err != nil {
			t.Fatal(err)
		}
	}
	data := string(evs[0].Data)
	if !strings.Contains(data, "refused") || !strings.Contains(data, classify.Redacted) {
		t.Fatalf("delivery event %s: want the connection error with the URL redacted", data)
	}
	for where, text := range map[string]string{"event": data, "logs": logs.String()} {
		for _, secret := range []string{password, token} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s shows %s: %s", where, secret, text)
			}
		}
	}
}

// TestCredentialPathsElided: a webhook URL whose path is its credential (a
// Slack incoming webhook) is shown to staff other than admins with the path
// elided, on the tools page and the action page; admins see the path.
func TestCredentialPathsElided(t *testing.T) {
	t.Parallel()
	const hook = "https://hooks.slack.com/services/T0001/B0001/PATHSECRET"
	reg, err := classify.Parse([]byte(fmt.Sprintf(`
tools:
  post_to_slack:
    class: at-most-once
    intent: "slack:{topic}"
    executor: { webhook: %q, timeout: 5s }
`, hook)), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	d := apptest.StartDashboard(t, apptest.Options{Tools: reg})
	d.AddUser("viewer@example.com", accounts.RoleViewer)
	d.AddUser("approver@example.com", accounts.RoleApprover)
	d.AddUser("admin@example.com", accounts.RoleAdmin)
	a := d.Submit("post_to_slack", `{"topic":"t"}`, "")
	for _, who := range []string{"viewer@example.com", "approver@example.com", "admin@example.com"} {
		b := d.Login(who)
		for _, path := range []string{"/tools", "/actions/" + a.ID} {
			body := b.Get(path).Body
			admin := who == "admin@example.com"
			if strings.Contains(body, "PATHSECRET") != admin {
				t.Errorf("%s on %s: the hook's path shown %v, want %v", who, path, !admin, admin)
			}
			if !admin && !strings.Contains(body, "https://hooks.slack.com/…") {
				t.Errorf("%s on %s: the elided hook is not shown", who, path)
			}
		}
	}
}
