package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/mcpserver"
	"github.com/approvals/approvals/queue"
)

// mailProvider is a fake email provider that counts the messages it sends
// and, while dropAnswers is set, sends and then drops the connection
// before answering: the sender cannot know the message went out.
type mailProvider struct {
	url         string
	mu          sync.Mutex
	sent        []string // subjects
	dropAnswers bool
}

func newMailProvider(t *testing.T) *mailProvider {
	p := &mailProvider{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Subject string `json:"subject"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		p.sent = append(p.sent, in.Subject)
		drop := p.dropAnswers
		p.mu.Unlock()
		if drop {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close() // sent, and the answer is lost
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"message_id":"m-1"}`))
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *mailProvider) send(ctx context.Context, payload json.RawMessage) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/send", bytes.NewReader(payload))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func (p *mailProvider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sent)
}

// The agent-layer case with a plan, on both stores: a plan of refund,
// email and status note is approved once by a person. The agent performs
// the refund and the note; its email goes out through the provider, but
// the provider's answer is lost and the agent's process dies holding the
// claim. Restarted, the agent rephrases the email and retries under the
// plan: refused with not_in_plan (over MCP and REST), nothing stored, no
// second message. The plan then shows the email step in_progress and,
// once the claim is stale, its ticket.
func TestAgentPlanEmailAnswerLost(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		name := map[bool]string{false: "postgres", true: "sqlite"}[sqlite]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a := apptest.Start(t, apptest.Options{SQLite: sqlite, Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})})
			e := &env{app: a, svc: a.Service, store: a.Store, url: a.URL + "/mcp"}
			api := &apptest.API{App: a, Clock: a.Clock, T: t, AgentToken: e.token(t, "agent"), Client: http.DefaultClient}
			payments, mail := newPaymentProvider(t), newMailProvider(t)
			cs := e.connect(t, api.AgentToken)

			refund := map[string]any{"order_id": "o-9", "line_id": "l-1", "amount": 25, "currency": "EUR"}
			email := map[string]any{"customer_id": "c-9", "topic": "refund-o-9", "to": "ann@customer.org",
				"subject": "Your refund", "body": "We refunded line 1 of order o-9."}
			note := map[string]any{"topic": "o-9", "text": "Refunded line 1; customer told."}
			res := call(t, cs, "propose_plan", map[string]any{"title": "Refund o-9 line 1 and tell the customer", "steps": []any{
				map[string]any{"tool": "issue_refund", "payload": refund},
				map[string]any{"tool": "send_customer_email", "payload": email},
				map[string]any{"tool": "post_update", "payload": note},
			}})
			pl := decode[queue.Plan](t, res)
			if res.IsError || pl.State != queue.PlanPending || len(pl.Steps) != 3 {
				t.Fatalf("propose_plan: %s", text(res))
			}

			// One human decision for the three steps.
			apptest.AddStaff(t, e.store, "ann@example.com", accounts.RoleApprover)
			if _, err := e.svc.Plans().Decide(ctx, queue.PlanDecideRequest{ID: pl.ID, To: queue.PlanApproved, By: "user:ann@example.com"}); err != nil {
				t.Fatal(err)
			}
			if got := decode[queue.Plan](t, call(t, cs, "get_plan", map[string]any{"id": pl.ID, "wait": "2s", "state": "pending"})); got.State != queue.PlanApproved {
				t.Fatalf("get_plan after the decision: %s", got.State)
			}
			with := func(args map[string]any) map[string]any {
				out := map[string]any{"plan": pl.ID}
				for k, v := range args {
					out[k] = v
				}
				return out
			}

			// Step 1: the refund is claimed, performed once, completed.
			claim := wantAction(t, call(t, cs, "issue_refund", with(refund)), queue.StateInProgress)
			result, err := payments.refund(ctx, claim.Payload)
			if err != nil {
				t.Fatal(err)
			}
			wantAction(t, call(t, cs, "complete_action", map[string]any{"id": claim.ID, "result": json.RawMessage(result)}), queue.StateDone)
			// Step 3: the status note.
			posted := wantAction(t, call(t, cs, "post_update", with(note)), queue.StateApproved)
			wantAction(t, call(t, cs, "execute_action", map[string]any{"id": posted.ID}), queue.StateInProgress)
			wantAction(t, call(t, cs, "complete_action", map[string]any{"id": posted.ID, "result": map[string]any{}}), queue.StateDone)

			// Step 2: approved by the plan, taken for execution, sent; the
			// provider's answer is lost and the agent's process dies.
			approved := wantAction(t, call(t, cs, "send_customer_email", with(email)), queue.StateApproved)
			if apptest.Deref(approved.DecidedBy) != "plan:"+pl.ID {
				t.Fatalf("the email was decided by %v, want the plan", apptest.Deref(approved.DecidedBy))
			}
			taken := wantAction(t, call(t, cs, "execute_action", map[string]any{"id": approved.ID}), queue.StateInProgress)
			mail.mu.Lock()
			mail.dropAnswers = true
			mail.mu.Unlock()
			if err := mail.send(ctx, taken.ApprovedPayload); err == nil {
				t.Fatal("the provider answered; the test needs the answer lost")
			}
			if mail.count() != 1 {
				t.Fatalf("the provider sent %d messages, want 1", mail.count())
			}
			cs.Close()

			// Restarted, with no memory of the claim, the agent rephrases
			// the email and retries under the plan: refused, naming step 2
			// and the fields that differ; nothing is stored or sent.
			cs2 := e.connect(t, api.AgentToken)
			rephrased := with(email)
			rephrased["subject"] = "About your refund"
			rephrased["body"] = "Line 1 of order o-9 has been refunded."
			r := wantRefusal(t, call(t, cs2, "send_customer_email", rephrased), queue.CodeNotInPlan)
			for _, want := range []string{"step 2", "/subject", "/body"} {
				if !strings.Contains(r.Detail, want) {
					t.Fatalf("not_in_plan over MCP: %q lacks %q", r.Detail, want)
				}
			}
			rest := map[string]any{"plan": pl.ID, "tool": "send_customer_email", "payload": map[string]any{
				"customer_id": "c-9", "topic": "refund-o-9", "to": "ann@customer.org", "subject": rephrased["subject"], "body": rephrased["body"]}}
			rr := api.Do(a.URL, api.AgentToken, "POST", "/api/v1/actions", rest)
			if rr.Status != http.StatusUnprocessableEntity || rr.Problem(t).Code != queue.CodeNotInPlan || !strings.Contains(rr.Problem(t).Detail, "step 2") {
				t.Fatalf("not_in_plan over REST: %d %s", rr.Status, rr.Body)
			}
			list, _, err := e.svc.List(ctx, queue.ListRequest{Tool: "send_customer_email", Limit: 10})
			if err != nil || len(list) != 1 || list[0].ID != approved.ID || list[0].State != queue.StateInProgress {
				t.Fatalf("email actions after the retries: %d (%v), want the one in progress", len(list), err)
			}
			if mail.count() != 1 {
				t.Fatalf("the provider sent %d messages, want 1", mail.count())
			}

			// The plan shows the email step in progress; once its claim is
			// stale, with its ticket, over MCP and REST.
			step2 := func(stale bool) {
				t.Helper()
				viaMCP := decode[queue.Plan](t, call(t, cs2, "get_plan", map[string]any{"id": pl.ID}))
				viaREST := api.Do(a.URL, api.AgentToken, "GET", "/api/v1/plans/"+pl.ID, nil)
				var got queue.Plan
				if viaREST.Status != http.StatusOK || json.Unmarshal(viaREST.Body, &got) != nil {
					t.Fatalf("GET plan: %d %s", viaREST.Status, viaREST.Body)
				}
				for face, p := range map[string]queue.Plan{mcpserver.Channel: viaMCP, "api": got} {
					s := p.Steps
					if p.State != queue.PlanApproved || s[0].ActionState != queue.StateDone || s[2].ActionState != queue.StateDone ||
						s[1].ActionID != approved.ID || s[1].ActionState != queue.StateInProgress {
						t.Fatalf("%s: plan %s, steps %s %s %s", face, p.State, s[0].ActionState, s[1].ActionState, s[2].ActionState)
					}
					switch {
					case !stale && s[1].Ticket != nil:
						t.Fatalf("%s: a ticket %+v before the claim is stale", face, s[1].Ticket)
					case stale && (s[1].Ticket == nil || s[1].Ticket.Kind != queue.TicketStale || s[1].Ticket.State != queue.TicketOpen):
						t.Fatalf("%s: step 2 ticket %+v, want an open stale ticket", face, s[1].Ticket)
					}
				}
			}
			step2(false)
			a.Clock.Advance(time.Hour)
			// The sweep passes over a row another transaction holds (the
			// outbox telling ops-events of the execution): sweep as the
			// background sweeper would, until the ticket is open.
			var opened []*queue.Ticket
			for i := 0; len(opened) == 0 && i < 100; i++ {
				sw, err := a.Sweeper.Sweep(ctx)
				if err != nil {
					t.Fatal(err)
				}
				opened = sw.Tickets
				if len(opened) == 0 {
					time.Sleep(20 * time.Millisecond)
				}
			}
			if len(opened) != 1 || opened[0].ActionID != approved.ID {
				t.Fatalf("the sweeps opened %d tickets, want one for the email", len(opened))
			}
			step2(true)
			if n := payments.effects("o-9", "l-1"); n != 1 {
				t.Fatalf("refunds = %d, want 1", n)
			}
		})
	}
}
