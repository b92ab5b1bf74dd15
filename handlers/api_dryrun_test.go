package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// policyAPI starts an API server on each store with the policy tools.
func policyAPI(t *testing.T, fn func(t *testing.T, e *apptest.API)) {
	t.Helper()
	for _, sqlite := range []bool{false, true} {
		name := "postgres"
		if sqlite {
			name = "sqlite"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, apptest.StartAPI(t, apptest.Options{SQLite: sqlite, Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})}))
		})
	}
}

func mailBody(customer, topic, to string) map[string]any {
	return map[string]any{"tool": "send_customer_email", "payload": map[string]any{
		"customer_id": customer, "topic": topic, "to": to, "subject": "s", "body": "b"}}
}

type dryAnswer struct {
	Outcome string       `json:"outcome"`
	Action  queue.Action `json:"action"`
	Rule    string       `json:"rule"`
	Grant   string       `json:"grant"`
}

// TestDryRunOverHTTP: POST /api/v1/actions?dry_run=true answers 200 with
// what the submission would do (every answer checked against the OpenAPI
// document), writes nothing, refuses what a submission refuses, and checks
// the token even when the server remembers it.
func TestDryRunOverHTTP(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		held := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", mailBody("c-1", "held", "x@customer.org"))
		if held.Status != http.StatusCreated {
			t.Fatalf("submit: %d %s", held.Status, held.Body)
		}
		heldID := held.Action(t).ID
		count := func() int {
			list, err := e.Store.ActionList(context.Background(), queue.ActionListParams{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			evs, err := e.Store.EventList(context.Background(), queue.EventListParams{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			return len(list)*1000 + len(evs)
		}
		before := count()
		for _, tc := range []struct {
			body          map[string]any
			outcome, rule string
			id            string
		}{
			{mailBody("c-2", "t", "a@example.com"), "approve", "internal-recipient", ""},
			{mailBody("c-2", "legal", "a@customer.org"), "reject", "legal-topics", ""},
			{mailBody("vip-2", "t", "a@customer.org"), "human", "vip-two-people", ""},
			{mailBody("c-2", "t", "a@customer.org"), "human", "", ""},
			{apptest.RefundBody("o-9", 10), "claim", "", ""},
			{apptest.RefundBody("o-9", 900), "human", "large-refund", ""},
			{map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"key": "k"}}, "record", "", ""},
			{mailBody("c-1", "held", "x@customer.org"), "replay", "", heldID},
			{mailBody("c-1", "held", "y@customer.org"), "conflict", "", heldID},
		} {
			for _, q := range []string{"?dry_run=true"} {
				r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions"+q, tc.body)
				var got dryAnswer
				if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || got.Outcome != tc.outcome || got.Rule != tc.rule || got.Action.ID != tc.id {
					t.Errorf("dry run of %v: %d %s, want 200 %s rule %q", tc.body, r.Status, r.Body, tc.outcome, tc.rule)
				}
				if r.Header.Get("Idempotent-Replayed") != "" || r.Header.Get("Location") != "" {
					t.Errorf("dry run of %v: headers of a submission %v", tc.body, r.Header)
				}
			}
		}
		if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions?dry_run=true", map[string]any{"tool": "issue_refund", "payload": map[string]any{"order_id": "x"}}); r.Status != http.StatusUnprocessableEntity || r.Problem(t).Code != queue.CodeInvalidPayload {
			t.Errorf("dry run of a bad payload: %d %s, want 422 invalid_payload", r.Status, r.Body)
		}
		if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions?dry_run=maybe", apptest.RefundBody("o-9", 10)); r.Status != http.StatusBadRequest {
			t.Errorf("dry_run=maybe: %d %s, want 400", r.Status, r.Body)
		}
		if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions?dry_run=false", apptest.RefundBody("o-10", 10)); r.Status != http.StatusCreated {
			t.Errorf("dry_run=false is a submission: %d %s", r.Status, r.Body)
		}
		if after := count(); after != before+1001 {
			t.Fatalf("rows: %d before, %d after; want only the dry_run=false submission's action and events", before, after)
		}
		// A revoked token, though the server has seen it valid: 401.
		if err := e.Store.TokenRevoke(context.Background(), accounts.TokenRevokeParams{Name: "bot", Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions?dry_run=true", apptest.RefundBody("o-9", 10)); r.Status != http.StatusUnauthorized {
			t.Errorf("dry run with a revoked token: %d %s", r.Status, r.Body)
		}
	})
}

// TestSubmitDecidedByPolicyOverHTTP: the 201 says what the rule did, and
// GET /api/v1/tools shows each tool's rules.
func TestSubmitDecidedByPolicyOverHTTP(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", mailBody("c-1", "t", "a@example.com"))
		a := r.Action(t)
		if r.Status != http.StatusCreated || a.State != queue.StateApproved || apptest.Deref(a.DecidedBy) != "policy:internal-recipient" {
			t.Fatalf("approved by policy: %d %s", r.Status, r.Body)
		}
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.RefundBody("o-1", 1))
		if r.Status != http.StatusCreated || r.Action(t).State != queue.StateInProgress {
			t.Fatalf("a small refund: %d %s", r.Status, r.Body)
		}
		body := apptest.RefundBody("o-2", 1)
		body["payload"].(map[string]any)["currency"] = "BTC"
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", body)
		if r.Status != http.StatusCreated || r.Action(t).State != queue.StateRejected || r.Action(t).ClaimedAt != nil {
			t.Fatalf("a BTC refund: %d %s", r.Status, r.Body)
		}
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", map[string]any{"tool": "send_customer_email",
			"payload": map[string]any{"customer_id": "c-3", "topic": "t"}})
		if r.Status != http.StatusCreated || len(r.Action(t).Warnings) != 1 || r.Action(t).Warnings[0] != "policy_error:internal-recipient" {
			t.Fatalf("a rule that cannot be evaluated: %d %s", r.Status, r.Body)
		}
		for series, want := range map[string]float64{
			`approvals_policy_decisions_total{decision="approve",rule="internal-recipient",tool="send_customer_email"}`: 1,
			`approvals_policy_decisions_total{decision="reject",rule="no-crypto",tool="issue_refund"}`:                  1,
		} {
			if got := e.App.Metric(t, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
		var tools struct {
			Tools []struct {
				Name   string `json:"name"`
				Policy []struct {
					Name, Expression, Decision, Note string
					Required                         int
					Approvers                        []string
				} `json:"policy"`
			} `json:"tools"`
		}
		r = e.Do(e.URL, e.AgentToken, "GET", "/api/v1/tools", nil)
		if err := json.Unmarshal(r.Body, &tools); err != nil {
			t.Fatal(err)
		}
		rules := map[string]int{}
		for _, tool := range tools.Tools {
			rules[tool.Name] = len(tool.Policy)
			if tool.Name == "send_customer_email" {
				p := tool.Policy
				if p[0].Name != "internal-recipient" || p[0].Decision != "approve" || p[0].Expression != `payload.to.endsWith("@example.com")` ||
					p[1].Note != "Legal topics go through the legal team." || p[2].Required != 2 || len(p[2].Approvers) != 2 {
					t.Errorf("send_customer_email's rules: %+v", p)
				}
			}
		}
		if rules["send_customer_email"] != 3 || rules["issue_refund"] != 2 || rules["post_update"] != 0 {
			t.Errorf("rules per tool: %v", rules)
		}
	})
}
