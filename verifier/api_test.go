package verifier_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// The agent whose refund's answer was lost asks the verifier itself
// (POST /api/v1/actions/{id}/verify): the provider has the refund, so the
// action is done with the provider's record, before any ticket; a second
// ask within 10 s is 429; a tool without a verifier is 404 no_verifier; a
// finished action 409; the registry says which tools have a verifier.
func TestVerifyEndpoint(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		p := newProvider(t)
		reg, err := classify.Parse([]byte(strings.ReplaceAll(verifyTools, "URL", p.srv.URL)+`
  plain:
    class: exactly-once
    intent: "plain:{id}"
`), classify.Options{WebhookSecretSet: true})
		if err != nil {
			t.Fatal(err)
		}
		api := apptest.StartAPI(t, apptest.Options{SQLite: sqlite, Tools: reg, WebhookSecret: secret, Clock: testclock.Frozen()})
		base, tok := api.URL, api.AgentToken

		tools := api.Do(base, tok, http.MethodGet, "/api/v1/tools", nil)
		var list struct {
			Tools []struct {
				Name        string `json:"name"`
				HasVerifier bool   `json:"has_verifier"`
				Guidance    string `json:"guidance"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(tools.Body, &list); err != nil {
			t.Fatal(err)
		}
		for _, tl := range list.Tools {
			want := tl.Name != "plain"
			if tl.HasVerifier != want || strings.Contains(tl.Guidance, "verify_action") != want {
				t.Fatalf("tool %s: has_verifier %v, guidance %q", tl.Name, tl.HasVerifier, tl.Guidance)
			}
		}

		// 1. the agent's late wait of the real pain: it asks, instead of resending.
		sub := api.Do(base, tok, http.MethodPost, "/api/v1/actions", map[string]any{"tool": "issue_refund",
			"payload": map[string]any{"order_id": "found-api", "line_id": "l-1", "amount": 12.5}})
		a := sub.Action(t)
		if a.State != queue.StateInProgress {
			t.Fatalf("submitted %s", a.State)
		}
		r := api.Do(base, tok, http.MethodPost, "/api/v1/actions/"+a.ID+"/verify", nil)
		var check struct {
			Verdict string       `json:"verdict"`
			Action  queue.Action `json:"action"`
		}
		if err := json.Unmarshal(r.Body, &check); err != nil || r.Status != http.StatusOK {
			t.Fatalf("verify: %d %s", r.Status, r.Body)
		}
		if check.Verdict != "done" || check.Action.State != queue.StateDone || !strings.Contains(string(check.Action.Result), "re_42") {
			t.Fatalf("verify answered %s, action %s %s", check.Verdict, check.Action.State, check.Action.Result)
		}
		// Its retry replays the provider's record.
		again := api.Do(base, tok, http.MethodPost, "/api/v1/actions", map[string]any{"tool": "issue_refund",
			"payload": map[string]any{"order_id": "found-api", "line_id": "l-1", "amount": 12.5}})
		if again.Status != http.StatusOK || !strings.Contains(string(again.Body), "re_42") {
			t.Fatalf("retry: %d %s", again.Status, again.Body)
		}
		// Done now: asking again is 409.
		if r := api.Do(base, tok, http.MethodPost, "/api/v1/actions/"+a.ID+"/verify", nil); r.Status != http.StatusConflict || r.Problem(t).Code != queue.CodeInvalidTransition {
			t.Fatalf("verify done: %d %s", r.Status, r.Body)
		}

		// 2. unknown (500) twice within 10 s: the second is 429 with Retry-After.
		b := api.Do(base, tok, http.MethodPost, "/api/v1/actions", map[string]any{"tool": "issue_refund",
			"payload": map[string]any{"order_id": "err-api", "line_id": "l-1", "amount": 1}}).Action(t)
		if r := api.Do(base, tok, http.MethodPost, "/api/v1/actions/"+b.ID+"/verify", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"unknown"`) {
			t.Fatalf("verify 500: %d %s", r.Status, r.Body)
		}
		r = api.Do(base, tok, http.MethodPost, "/api/v1/actions/"+b.ID+"/verify", nil)
		if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "10" || r.Problem(t).Code != queue.CodeTooManyChecks {
			t.Fatalf("second verify: %d %v %s", r.Status, r.Header, r.Body)
		}
		api.Clock.Advance(10 * time.Second)
		if r := api.Do(base, tok, http.MethodPost, "/api/v1/actions/"+b.ID+"/verify", nil); r.Status != http.StatusOK {
			t.Fatalf("after 10 s: %d %s", r.Status, r.Body)
		}
		if n := api.Metric(t, `approvals_verifications_total{tool="issue_refund",verdict="unknown"}`); n != 2 {
			t.Fatalf("unknown verifications counted %v", n)
		}
		if n := api.Metric(t, `approvals_verifications_total{tool="issue_refund",verdict="done"}`); n != 1 {
			t.Fatalf("done verifications counted %v", n)
		}
		for _, by := range []string{"verifier", "operator", "agent"} {
			if n := api.Metric(t, `approvals_tickets_resolved_total{by="`+by+`"}`); n != 0 {
				t.Fatalf("tickets resolved by %s counted %v, with no ticket", by, n)
			}
		}
		if n := p.count("err-api"); n != 2 {
			t.Fatalf("the provider was asked %d times", n)
		}
		if a := api.Do(base, tok, http.MethodGet, "/api/v1/actions/"+b.ID, nil).Action(t); a.State != queue.StateInProgress {
			t.Fatalf("unknown moved it to %s", a.State)
		}

		// 3. no verifier: 404 no_verifier.
		c := api.Do(base, tok, http.MethodPost, "/api/v1/actions", map[string]any{"tool": "plain", "payload": map[string]any{"id": "1"}}).Action(t)
		if r := api.Do(base, tok, http.MethodPost, "/api/v1/actions/"+c.ID+"/verify", nil); r.Status != http.StatusNotFound || r.Problem(t).Code != queue.CodeNoVerifier {
			t.Fatalf("no verifier: %d %s", r.Status, r.Body)
		}
		p.check(t)
	}
}

// Six agent asks about one action at once, on two processes over one
// PostgreSQL database and on SQLite: the verifier is asked once, the
// other five are 429 too_many_checks with a Retry-After of when the slot
// frees (the clock is frozen: the whole interval); after it one more ask
// is answered. The slot is taken before the verifier is asked (its answer
// takes up to its timeout), not judged from the checks written after.
func TestVerifyEndpointOncePerIntervalUnderConcurrency(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		p := newProvider(t)
		reg, err := classify.Parse([]byte(strings.ReplaceAll(verifyTools, "URL", p.srv.URL)), classify.Options{WebhookSecretSet: true})
		if err != nil {
			t.Fatal(err)
		}
		api := apptest.StartAPI(t, apptest.Options{SQLite: sqlite, Tools: reg, WebhookSecret: secret, Clock: testclock.Frozen()})
		bases := []string{api.URL}
		if !sqlite {
			bases = append(bases, api.AddServerURL())
		}
		// "slow-…" answers after the verifier's 300 ms timeout: each ask
		// that reaches it holds its check open that long.
		a := api.Do(api.URL, api.AgentToken, http.MethodPost, "/api/v1/actions", map[string]any{"tool": "issue_refund",
			"payload": map[string]any{"order_id": "slow-race", "line_id": "l-1", "amount": 3}}).Action(t)
		got := apptest.RunConcurrently(6, func(i int) apptest.Resp {
			return api.Do(bases[i%len(bases)], api.AgentToken, http.MethodPost, "/api/v1/actions/"+a.ID+"/verify", nil)
		})
		ok := 0
		for _, r := range got {
			switch {
			case r.Status == http.StatusOK:
				ok++
			case r.Status == http.StatusTooManyRequests && r.Problem(t).Code == queue.CodeTooManyChecks:
				if ra := r.Header.Get("Retry-After"); ra != "10" {
					t.Fatalf("sqlite %v: Retry-After %q, want 10 (the clock is frozen)", sqlite, ra)
				}
			default:
				t.Fatalf("sqlite %v: concurrent verify: %d %s", sqlite, r.Status, r.Body)
			}
		}
		if n := p.count("slow-race"); ok != 1 || n != 1 {
			t.Fatalf("sqlite %v: %d asks answered, the verifier asked %d times; want 1 and 1", sqlite, ok, n)
		}
		api.Clock.Advance(4 * time.Second)
		r := api.Do(api.URL, api.AgentToken, http.MethodPost, "/api/v1/actions/"+a.ID+"/verify", nil)
		if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "6" {
			t.Fatalf("sqlite %v: 4 s later: %d %v %s, want 429 with Retry-After 6", sqlite, r.Status, r.Header, r.Body)
		}
		api.Clock.Advance(6 * time.Second)
		again := apptest.RunConcurrently(4, func(i int) apptest.Resp {
			return api.Do(bases[i%len(bases)], api.AgentToken, http.MethodPost, "/api/v1/actions/"+a.ID+"/verify", nil)
		})
		ok = 0
		for _, r := range again {
			if r.Status == http.StatusOK {
				ok++
			}
		}
		if n := p.count("slow-race"); ok != 1 || n != 2 {
			t.Fatalf("sqlite %v: after 10 s %d asks answered, the verifier asked %d times in all; want 1 and 2", sqlite, ok, n)
		}
		p.check(t)
	}
}
