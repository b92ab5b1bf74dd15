package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
)

// approvals verify test asks the file's verifier about stored actions and
// prints the verdict, reason and answer of each, writing nothing.
func TestVerifyTest(t *testing.T) {
	// Not parallel: the command reads APPROVALS_WEBHOOK_SECRET.
	t.Setenv("APPROVALS_WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"order_id":"o-found"`) {
			_, _ = io.WriteString(w, `{"refunds":[{"id":"re_9","line_id":1}]}`)
			return
		}
		http.Error(w, "down", http.StatusBadGateway)
	}))
	t.Cleanup(provider.Close)
	file := `
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: ` + provider.URL + `
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      resolve: auto
  plain:
    class: exactly-once
    intent: "plain:{id}"
`
	for _, sqlite := range []bool{true, false} {
		e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Tools: apptest.ParseTools(t, file, classify.Options{WebhookSecretSet: true})})
		found := e.Submit("issue_refund", map[string]any{"order_id": "o-found", "line_id": 1})
		down := e.Submit("issue_refund", map[string]any{"order_id": "o-down", "line_id": 1})
		plain := e.Submit("plain", map[string]any{"id": "1"})
		tools := filepath.Join(t.TempDir(), "tools.yaml")
		if err := os.WriteFile(tools, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		db := e.DatabaseURL
		if db == "" {
			db = "sqlite:" + e.SQLitePath
		}
		before := storeState(t, e)
		var out, errOut bytes.Buffer
		if code := run(t.Context(), []string{"verify", "test", "--database-url", db, tools, found.ID, down.ID, plain.ID}, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("verify test: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		got := out.String()
		for _, want := range []string{
			found.ID + "  issue_refund  in_progress: done (done holds for the answer)", `"re_9"`,
			down.ID + "  issue_refund  in_progress: unknown (no answer: status 502",
			plain.ID + "  plain  in_progress: the tool has no verifier",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("output lacks %q:\n%s", want, got)
			}
		}
		if after := storeState(t, e); after != before {
			t.Fatalf("verify test wrote:\nbefore %s\nafter  %s", before, after)
		}
	}
}
