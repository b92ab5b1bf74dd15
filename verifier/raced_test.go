package verifier_test

import (
	"context"
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

// While the provider is asked, the agent's late report settles the action
// the other way (fail, where the provider has the refund): the stored
// outcome stands, and the proof that contradicts it opens a conflict
// ticket, whichever way the check would have settled the action (auto with
// its stale ticket, auto before any ticket, suggest).
func TestVerifierProofContradictingAReportMadeMeanwhile(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var e *apptest.Env
			var report func() // the agent's report, made while the provider is asked
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				if report != nil {
					report()
				}
				_, _ = io.WriteString(w, `{"refunds":[{"id":"re_42","line_id":"l-7"}]}`)
			}))
			t.Cleanup(srv.Close)
			reg, err := classify.Parse([]byte(strings.ReplaceAll(verifyTools, "URL", srv.URL)), classify.Options{WebhookSecretSet: true})
			if err != nil {
				t.Fatal(err)
			}
			asker, err := verifier.New(verifier.Config{Secret: secret})
			if err != nil {
				t.Fatal(err)
			}
			e = apptest.NewEnv(t, apptest.EnvOptions{SQLite: kind == "sqlite", Tools: reg, Clock: testclock.Frozen(),
				Service: queue.Options{Verifier: asker}})

			for _, c := range []struct {
				name, tool string
				stale      bool
			}{{"auto, stale ticket", "issue_refund", true}, {"auto, no ticket", "issue_refund", false}, {"suggest", "refund_suggest", true}} {
				a := staleRefund(t, e, c.tool, "o-"+strings.ReplaceAll(c.name, " ", ""))
				if c.stale {
					e.Clock.Advance(2*time.Minute + time.Second)
					// The sweep's first step alone: the ticket opens, nobody asks yet.
					if _, err := e.Store.TicketOpenStale(ctx, queue.StaleDue(e.Clock.Now(), 10)); err != nil {
						t.Fatal(err)
					}
				}
				report = func() {
					report = nil
					if _, err := e.Service.Fail(ctx, a.ID, "bot", "the provider said no", "api"); err != nil {
						t.Errorf("%s: late fail: %v", c.name, err)
					}
				}
				if _, err := e.Service.Tickets().Verify(ctx, queue.VerifyRequest{ActionID: a.ID, By: "user:ops@example.com"}); err != nil {
					t.Fatalf("%s: verify: %v", c.name, err)
				}
				got := get(t, e, a.ID)
				if got.State != queue.StateFailed {
					t.Fatalf("%s: the proof moved the agent's failed action to %s", c.name, got.State)
				}
				if got.Ticket == nil || got.Ticket.Kind != queue.TicketConflict || got.Ticket.State != queue.TicketOpen {
					t.Fatalf("%s: ticket %+v, want an open conflict ticket: the provider has the refund the agent reported failed", c.name, got.Ticket)
				}
				// The conflict holds the released intent: a new attempt could refund twice.
				raw, _ := json.Marshal(a.Payload)
				if _, err := e.Service.Submit(ctx, queue.SubmitRequest{Tool: c.tool, Payload: raw, Agent: "bot"}); queue.ErrorCode(err) != queue.CodeIntentUnderReview {
					t.Fatalf("%s: a new submission of the intent: %v, want intent_under_review", c.name, err)
				}
			}
		})
	}
}
