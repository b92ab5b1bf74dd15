package verifier_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/verifier"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// provider answers as a payment provider's refund lookup would: by the
// order_id of the action's payload, "found-…" has a refund for the line,
// "none-…" has none, "slow-…" answers after the verifier's timeout,
// "err-…" answers 500, "junk-…" answers HTML. Every request's signature is
// checked with the Standard Webhooks library.
type provider struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int // by order_id
	bad  []string
	ids  map[string]bool // webhook-id seen
}

func newProvider(t *testing.T) *provider {
	p := &provider{hits: map[string]int{}, ids: map[string]bool{}}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var q struct {
			Type   string `json:"type"`
			Action struct {
				ID              string         `json:"id"`
				Tool            string         `json:"tool"`
				IntentKey       string         `json:"intent_key"`
				Payload         map[string]any `json:"payload"`
				ApprovedPayload map[string]any `json:"approved_payload"`
			} `json:"action"`
		}
		_ = json.Unmarshal(body, &q)
		order, _ := q.Action.Payload["order_id"].(string)
		p.mu.Lock()
		p.hits[order]++
		if err := wh.Verify(body, r.Header); err != nil {
			p.bad = append(p.bad, "signature: "+err.Error())
		}
		if q.Type != "action.verify" || q.Action.ID == "" || q.Action.IntentKey == "" {
			p.bad = append(p.bad, "question: "+string(body))
		}
		id := r.Header.Get("webhook-id")
		if p.ids[id] {
			p.bad = append(p.bad, "webhook-id used twice: "+id)
		}
		p.ids[id] = true
		p.mu.Unlock()
		line, _ := q.Action.Payload["line_id"].(string)
		switch {
		case strings.HasPrefix(order, "found"):
			_, _ = io.WriteString(w, `{"refunds":[{"id":"re_1","line_id":"other"},{"id":"re_42","line_id":"`+line+`","amount":1250,"status":"succeeded"}]}`)
		case strings.HasPrefix(order, "none"):
			_, _ = io.WriteString(w, `{"refunds":[{"id":"re_1","line_id":"other"}]}`)
		case strings.HasPrefix(order, "slow"):
			select {
			case <-release:
			case <-time.After(3 * time.Second):
			}
			_, _ = io.WriteString(w, `{"refunds":[{"id":"re_42","line_id":"`+line+`"}]}`)
		case strings.HasPrefix(order, "err"):
			http.Error(w, `{"refunds":[]}`, http.StatusInternalServerError)
		default:
			_, _ = io.WriteString(w, `<html>maintenance</html>`)
		}
	}))
	t.Cleanup(func() { close(release); p.srv.Close() })
	return p
}

func (p *provider) count(order string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[order]
}

func (p *provider) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bad) > 0 {
		t.Fatalf("the provider refused: %v", p.bad)
	}
}

const verifyTools = `
tools:
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: URL
      timeout: 300ms
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      not_done: '!response.refunds.exists(r, r.line_id == payload.line_id)'
      result: 'response.refunds.filter(r, r.line_id == payload.line_id)[0]'
      settle: 1m
      resolve: auto
  refund_suggest:
    class: exactly-once
    intent: "refund-s:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: URL
      timeout: 300ms
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      not_done: '!response.refunds.exists(r, r.line_id == payload.line_id)'
`

// resolvedCount counts the Service's ticket resolutions by who made them
// (queue.Options.OnTicketResolved, what /metrics counts).
type resolvedCount struct {
	mu sync.Mutex
	by map[string]int
}

func (c *resolvedCount) add(by string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by[by]++
}

func (c *resolvedCount) want(t *testing.T, what string, verifier, operator, agent int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by[queue.ResolvedByVerifier] != verifier || c.by[queue.ResolvedByOperator] != operator || c.by[queue.ResolvedByAgent] != agent || len(c.by) > 3 {
		t.Fatalf("%s: tickets resolved %v, want verifier %d, operator %d, agent %d", what, c.by, verifier, operator, agent)
	}
}

// verifyEnv runs fn on both stores, each with a payment provider of its own.
func verifyEnv(t *testing.T, fn func(t *testing.T, e *apptest.Env, p *provider)) {
	verifyEnvCounting(t, func(t *testing.T, e *apptest.Env, p *provider, _ *resolvedCount) { fn(t, e, p) })
}

// verifyEnvCounting is verifyEnv with the ticket resolutions counted.
func verifyEnvCounting(t *testing.T, fn func(t *testing.T, e *apptest.Env, p *provider, c *resolvedCount)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t)
			reg, err := classify.Parse([]byte(strings.ReplaceAll(verifyTools, "URL", p.srv.URL)), classify.Options{WebhookSecretSet: true})
			if err != nil {
				t.Fatal(err)
			}
			asker, err := verifier.New(verifier.Config{Secret: secret})
			if err != nil {
				t.Fatal(err)
			}
			c := &resolvedCount{by: map[string]int{}}
			fn(t, apptest.NewEnv(t, apptest.EnvOptions{SQLite: kind == "sqlite", Tools: reg, Clock: testclock.Frozen(),
				Service: queue.Options{Verifier: asker, OnTicketResolved: c.add}}), p, c)
		})
	}
}

// staleRefund submits a refund (claimed at once: exactly-once) and moves
// the clock past its claim_timeout, as when the agent's answer was lost.
func staleRefund(t *testing.T, e *apptest.Env, tool, order string) *queue.Action {
	a := e.Submit(tool, map[string]any{"order_id": order, "line_id": "l-7", "amount": 12.5})
	if a.State != queue.StateInProgress {
		t.Fatalf("submitted %s, want in_progress", a.State)
	}
	return a
}

func sweep(t *testing.T, e *apptest.Env) {
	t.Helper()
	if _, err := e.Sweeper().Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, e *apptest.Env, id string) *queue.Action {
	t.Helper()
	a, err := e.Store.ActionGetByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func lastCheck(t *testing.T, e *apptest.Env, id string) map[string]any {
	t.Helper()
	ev, ok, err := queue.LatestVerifyCheck(context.Background(), e.Store, id)
	if err != nil || !ok {
		t.Fatalf("no verified event: %v", err)
	}
	if ev.Actor != "verifier:"+get(t, e, id).Tool || ev.Channel != queue.ChannelVerifier {
		t.Fatalf("verified by %s on %s", ev.Actor, ev.Channel)
	}
	var m map[string]any
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Each answer of a payment provider, through the sweep: found resolves the
// ticket and finishes the action with the provider's record; not found
// fails it only after settle; slow, 500 and garbage change nothing. Each
// ticket's resolution is counted once, by who made it.
func TestVerifierVerdicts(t *testing.T) {
	t.Parallel()
	verifyEnvCounting(t, func(t *testing.T, e *apptest.Env, p *provider, resolved *resolvedCount) {
		ctx := context.Background()
		found := staleRefund(t, e, "issue_refund", "found-1")
		none := staleRefund(t, e, "issue_refund", "none-1")
		slow := staleRefund(t, e, "issue_refund", "slow-1")
		failing := staleRefund(t, e, "issue_refund", "err-1")
		junk := staleRefund(t, e, "issue_refund", "junk-1")
		suggest := staleRefund(t, e, "refund_suggest", "found-s")

		// Before the claim goes stale nothing is asked.
		sweep(t, e)
		if n := p.count("none-1"); n != 0 {
			t.Fatalf("asked %d times before any ticket", n)
		}
		e.Clock.Advance(2*time.Minute + time.Second)
		sweep(t, e) // opens the tickets and asks at once

		a := get(t, e, found.ID)
		if a.State != queue.StateDone || a.Ticket == nil || a.Ticket.State != queue.TicketResolved ||
			apptest.Deref(a.Ticket.ResolvedBy) != "verifier:issue_refund" {
			t.Fatalf("found: %s, ticket %+v", a.State, a.Ticket)
		}
		var result map[string]any
		if err := json.Unmarshal(a.Result, &result); err != nil || result["id"] != "re_42" {
			t.Fatalf("result %s, want the provider's record re_42", a.Result)
		}
		if c := lastCheck(t, e, found.ID); c["verdict"] != "done" || c["tools_hash"] != e.Tools.Hash || c["answer"] == nil {
			t.Fatalf("check %v", c)
		}
		// The agent, whose answer was lost, retries: it gets the provider's
		// record replayed, and nobody was asked.
		raw, _ := json.Marshal(map[string]any{"order_id": "found-1", "line_id": "l-7", "amount": 12.5})
		retry, err := e.Service.Submit(ctx, queue.SubmitRequest{Tool: "issue_refund", Payload: raw, Agent: "bot"})
		if err != nil || !retry.Replayed || retry.Action.ID != found.ID || string(retry.Action.Result) != string(a.Result) {
			t.Fatalf("retry: %v %+v", err, retry)
		}
		if n := e.EventCount(found.ID, queue.EventVerified); n != 1 {
			t.Fatalf("%d checks", n)
		}
		resolved.want(t, "after the first round", 1, 0, 0)
		// An operator who comes too late resolves nothing, and nothing is counted.
		if _, _, err := e.Service.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: a.Ticket.ID,
			By: "user:ops@example.com", Outcome: queue.StateDone, Note: "found it too"}); queue.ErrorCode(err) != queue.CodeTicketResolved {
			t.Fatalf("late operator: %v", err)
		}
		resolved.want(t, "after a late operator", 1, 0, 0)

		// Not found, but before settle (claim 2m + settle 1m): unknown.
		if a := get(t, e, none.ID); a.State != queue.StateInProgress {
			t.Fatalf("not found before settle moved it to %s", a.State)
		}
		if c := lastCheck(t, e, none.ID); c["verdict"] != "unknown" || !strings.Contains(c["reason"].(string), "settle") {
			t.Fatalf("early not_done: %v", c)
		}
		for _, x := range []struct {
			a      *queue.Action
			reason string
		}{{slow, "timed out"}, {failing, "status 500"}, {junk, "not JSON"}} {
			if a := get(t, e, x.a.ID); a.State != queue.StateInProgress || a.Ticket.State != queue.TicketOpen {
				t.Fatalf("%s: %s, ticket %s", x.reason, a.State, a.Ticket.State)
			}
			if c := lastCheck(t, e, x.a.ID); c["verdict"] != "unknown" || !strings.Contains(c["reason"].(string), x.reason) {
				t.Fatalf("%s: %v", x.reason, c)
			}
		}
		// suggest: the proof is recorded, a person resolves.
		if a := get(t, e, suggest.ID); a.State != queue.StateInProgress || a.Ticket.State != queue.TicketOpen {
			t.Fatalf("suggest resolved: %s", a.State)
		}
		if c := lastCheck(t, e, suggest.ID); c["verdict"] != "done" {
			t.Fatalf("suggest check %v", c)
		}

		// One round per due time: a second sweep now asks nobody again.
		sweep(t, e)
		if n := p.count("none-1"); n != 1 {
			t.Fatalf("asked %d times in one round", n)
		}
		// After a minute the next round: settle has passed, not found fails it.
		e.Clock.Advance(time.Minute)
		sweep(t, e)
		a = get(t, e, none.ID)
		if a.State != queue.StateFailed || apptest.Deref(a.Ticket.ResolvedBy) != "verifier:issue_refund" || apptest.Deref(a.Ticket.Outcome) != queue.StateFailed {
			t.Fatalf("not found after settle: %s, ticket %+v", a.State, a.Ticket)
		}
		if n := p.count("none-1"); n != 2 {
			t.Fatalf("asked %d times", n)
		}
		// The suggested verdict stops the schedule; the unknowns go on: 1, 2, 4 minutes.
		if n := p.count("found-s"); n != 1 {
			t.Fatalf("suggest asked %d times", n)
		}
		if n := p.count("err-1"); n != 2 {
			t.Fatalf("500 asked %d times after 1 minute", n)
		}
		e.Clock.Advance(time.Minute) // 2 minutes after the second round: not yet
		sweep(t, e)
		if n := p.count("err-1"); n != 2 {
			t.Fatalf("500 asked %d times before its next round", n)
		}
		e.Clock.Advance(time.Minute)
		sweep(t, e)
		if n := p.count("err-1"); n != 3 {
			t.Fatalf("500 asked %d times", n)
		}
		// Operator resolution of the suggested verdict still works as any resolution.
		if a, _, err := e.Service.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: get(t, e, suggest.ID).Ticket.ID,
			By: "user:ops@example.com", Outcome: queue.StateDone, Note: "verified"}); err != nil || a.State != queue.StateDone {
			t.Fatalf("resolve as verified: %v", err)
		}
		resolved.want(t, "after the operator", 2, 1, 0)
		// The agent's late report settles the garbage one's ticket; its
		// second report is a replay and resolves nothing more.
		for range 2 {
			if _, err := e.Service.Complete(ctx, junk.ID, "bot", json.RawMessage(`{"refund":"re_9"}`), "api"); err != nil {
				t.Fatalf("late report: %v", err)
			}
		}
		if a := get(t, e, junk.ID); a.State != queue.StateDone || a.Ticket.State != queue.TicketResolved {
			t.Fatalf("late report: %s, ticket %+v", a.State, a.Ticket)
		}
		resolved.want(t, "after the agent's late report", 2, 1, 1)
		p.check(t)
	})
}

// Two server processes sweep one database at the same moments: each round
// of each ticket is asked once, on both stores.
func TestVerifierOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	verifyEnv(t, func(t *testing.T, e *apptest.Env, p *provider) {
		other := e.AddProcess()
		orders := []string{"err-a", "err-b", "err-c", "junk-d", "slow-e"}
		for _, o := range orders {
			staleRefund(t, e, "issue_refund", o)
		}
		e.Clock.Advance(2*time.Minute + time.Second)
		round := func() {
			var wg sync.WaitGroup
			for _, env := range []*apptest.Env{e, other, e, other} {
				wg.Go(func() {
					if _, err := env.Sweeper().Sweep(context.Background()); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}
		round()
		for _, o := range orders {
			if n := p.count(o); n != 1 {
				t.Fatalf("%s asked %d times in the first round", o, n)
			}
		}
		e.Clock.Advance(time.Minute)
		round()
		round()
		for _, o := range orders {
			if n := p.count(o); n != 2 {
				t.Fatalf("%s asked %d times after the second round", o, n)
			}
		}
		p.check(t)
	})
}
