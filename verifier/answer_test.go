package verifier_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/verifier"
)

// A provider whose answer holds bytes that are not UTF-8 inside a string
// (a legacy system's name field, say) still proves what it proves: the
// agent's check answers 200 with the verdict, never a 5xx, and the check
// is recorded with the answer as text can hold it, on both stores.
func TestVerifierAnswerNotUTF8(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			_, _ = io.WriteString(w, "{\"refunds\":[{\"id\":\"re_42\",\"line_id\":\"l-7\",\"name\":\"M\xfcller\"}]}")
		}))
		t.Cleanup(srv.Close)
		reg, err := classify.Parse([]byte(strings.ReplaceAll(verifyTools, "URL", srv.URL)), classify.Options{WebhookSecretSet: true})
		if err != nil {
			t.Fatal(err)
		}
		api := apptest.StartAPI(t, apptest.Options{SQLite: sqlite, Tools: reg, WebhookSecret: secret, Clock: testclock.Frozen()})
		for _, tool := range []string{"issue_refund", "refund_suggest"} {
			a := api.Do(api.URL, api.AgentToken, http.MethodPost, "/api/v1/actions", map[string]any{"tool": tool,
				"payload": map[string]any{"order_id": "o-latin1", "line_id": "l-7", "amount": 1}}).Action(t)
			r := api.Do(api.URL, api.AgentToken, http.MethodPost, "/api/v1/actions/"+a.ID+"/verify", nil)
			var check struct {
				Verdict string       `json:"verdict"`
				Action  queue.Action `json:"action"`
			}
			if err := json.Unmarshal(r.Body, &check); err != nil || r.Status != http.StatusOK {
				t.Fatalf("sqlite %v, %s: verify: %d %s", sqlite, tool, r.Status, r.Body)
			}
			want := queue.StateInProgress
			if tool == "issue_refund" {
				want = queue.StateDone
			}
			if check.Verdict != classify.VerdictDone || check.Action.State != want {
				t.Fatalf("sqlite %v, %s: verdict %s, action %s", sqlite, tool, check.Verdict, check.Action.State)
			}
			got := api.Do(api.URL, api.AgentToken, http.MethodGet, "/api/v1/actions/"+a.ID, nil).Action(t)
			if got.State != want {
				t.Fatalf("sqlite %v, %s: stored %s", sqlite, tool, got.State)
			}
		}
	}
}

// An answer longer than 64 KiB proves nothing (unknown), and the check
// keeps what it was told capped at 64 KiB, as every check keeps its answer.
func TestVerifierAnswerOver64KiB(t *testing.T) {
	t.Parallel()
	long := `{"refunds":[{"id":"re_42","line_id":"l-7","memo":"` + strings.Repeat("x", queue.MaxVerifyAnswer) + `"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, long)
	}))
	t.Cleanup(srv.Close)
	verifyEnvWith(t, srv.URL, func(t *testing.T, e *apptest.Env) {
		a := staleRefund(t, e, "issue_refund", "o-long")
		e.Clock.Advance(3 * time.Minute)
		sweep(t, e)
		if got := get(t, e, a.ID); got.State != queue.StateInProgress {
			t.Fatalf("an answer over 64 KiB settled the action: %s", got.State)
		}
		c := lastCheck(t, e, a.ID)
		text, _ := c["answer_text"].(string)
		if c["verdict"] != "unknown" || c["answer_cut"] != true || len(text) != queue.MaxVerifyAnswer || !strings.HasPrefix(long, text) {
			t.Fatalf("check %v %v, answer kept: %d bytes", c["verdict"], c["reason"], len(text))
		}
	})
}

// verifyEnvWith runs fn on both stores, the tools' verifiers asking url.
func verifyEnvWith(t *testing.T, url string, fn func(t *testing.T, e *apptest.Env)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			reg, err := classify.Parse([]byte(strings.ReplaceAll(verifyTools, "URL", url)), classify.Options{WebhookSecretSet: true})
			if err != nil {
				t.Fatal(err)
			}
			asker, err := verifier.New(verifier.Config{Secret: secret})
			if err != nil {
				t.Fatal(err)
			}
			fn(t, apptest.NewEnv(t, apptest.EnvOptions{SQLite: kind == "sqlite", Tools: reg, Clock: testclock.Frozen(),
				Service: queue.Options{Verifier: asker}}))
		})
	}
}
