package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// historyTools is the file the history was made under: the tools of
// docs/policies.md's example, without a policy.
const historyTools = `
tools:
  send_customer_email:
    intent: "email:{customer_id}:{topic}"
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
`

// TestPolicyTestOnSeededHistory: approvals policy test runs the policy of
// apptest.PolicyTools over a history made without it, counts what each
// rule would have decided in the window, names every action a person
// decided otherwise, and writes nothing.
func TestPolicyTestOnSeededHistory(t *testing.T) {
	t.Parallel()
	opts := apptest.EnvOptions{Tools: apptest.ParseTools(t, historyTools, classify.Options{}),
		Clock: testclock.At(time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second))}
	apptest.OnBothStores(t, opts, func(t *testing.T, e *apptest.Env) {
		ctx := context.Background()
		svc := e.Service
		mail := func(customer, topic string, to any) *queue.Action {
			return e.Submit("send_customer_email", map[string]any{"customer_id": customer, "topic": topic, "to": to})
		}
		decide := func(a *queue.Action, to queue.State, payload json.RawMessage) {
			t.Helper()
			if _, err := svc.Decide(ctx, queue.DecideRequest{ID: a.ID, To: to, By: apptest.Approver, Note: "because", Payload: payload}); err != nil {
				t.Fatal(err)
			}
		}
		// Before the window: counted nowhere.
		old := mail("c-0", "old", "a@example.com")
		decide(old, queue.StateRejected, nil)
		e.Clock.Advance(47 * time.Hour)

		rejected := mail("c-1", "t", "a@example.com") // internal-recipient approves what was rejected
		decide(rejected, queue.StateRejected, nil)
		changes := mail("c-2", "t", "b@example.com") // ... what a person asked to change
		decide(changes, queue.StateChangesRequested, nil)
		edited := mail("c-3", "t", "c@example.com") // ... what was approved only with an edit
		decide(edited, queue.StateApproved, json.RawMessage(`{"customer_id":"c-3","topic":"t","to":"c@example.com","cc":"x"}`))
		agreed := mail("c-4", "t", "d@example.com") // approved as it was: they agree
		decide(agreed, queue.StateApproved, nil)
		legalApproved := mail("c-5", "legal", "x@customer.org") // legal-topics rejects what was approved
		decide(legalApproved, queue.StateApproved, nil)
		legalRejected := mail("c-6", "lawsuit", "x@customer.org") // agreed
		decide(legalRejected, queue.StateRejected, nil)
		// internal-recipient matches, but live it approves nothing a
		// person did not see (invisible_characters): a person decides, so
		// no disagreement and no approval.
		hidden := mail("c-9", "t", "e\u200b@example.com")
		decide(hidden, queue.StateRejected, nil)
		mail("vip-1", "t", "v@customer.org")   // vip-two-people: a person decides anyway
		mail("c-7", "t", "plain@customer.org") // no rule
		mail("c-8", "t", nil2())               // internal-recipient cannot be evaluated: a person decides
		e.Submit("issue_refund", map[string]any{"order_id": "o-1", "line_id": 1, "amount": 900, "currency": "EUR"})
		e.Submit("issue_refund", map[string]any{"order_id": "o-2", "line_id": 1, "amount": 9, "currency": "BTC"})
		e.Submit("issue_refund", map[string]any{"order_id": "o-3", "line_id": 1, "amount": 9, "currency": "EUR"})

		tools := filepath.Join(t.TempDir(), "tools.yaml")
		if err := os.WriteFile(tools, []byte(apptest.PolicyTools), 0o600); err != nil {
			t.Fatal(err)
		}
		db := e.DatabaseURL
		if db == "" {
			db = "sqlite:" + e.SQLitePath
		}
		before := storeState(t, e)
		var out, errOut bytes.Buffer
		if code := run(ctx, []string{"policy", "test", "--since", "36h", "--database-url", db, tools}, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("policy test: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		got := out.String()
		t.Log(got)
		for _, want := range []string{
			"13 submissions of tools with a policy in the last 36h",
			// The whole block of send_customer_email: c-8's internal-recipient
			// fails, so a person decides and no later rule counts it.
			"send_customer_email\n" +
				fmt.Sprintf("  %-28s %-8s %d\n", "internal-recipient", "approve", 4) +
				fmt.Sprintf("  %-28s %-8s %d\n", "legal-topics", "reject", 2) +
				fmt.Sprintf("  %-28s %-8s %d\n", "vip-two-people", "human", 1) +
				fmt.Sprintf("  %-28s %-8s %d\n", "(no rule)", "", 1) +
				fmt.Sprintf("  %-28s %-8s %d\n", "(a rule failed: policy_error)", "human", 1) +
				fmt.Sprintf("  %-28s %-8s %d\n", "(approve held: a warning)", "human", 1),
			"issue_refund\n",
			fmt.Sprintf("  %-28s %-8s %d\n", "large-refund", "human", 1),
			fmt.Sprintf("  %-28s %-8s %d\n", "no-crypto", "reject", 1),
			"people decided otherwise: 4\n",
			"  " + rejected.ID + " send_customer_email: internal-recipient approves what ann@example.com rejected\n",
			"  " + changes.ID + " send_customer_email: internal-recipient approves what ann@example.com asked for changes\n",
			"  " + edited.ID + " send_customer_email: internal-recipient approves what ann@example.com approved with an edit\n",
			"  " + legalApproved.ID + " send_customer_email: legal-topics rejects what ann@example.com approved\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the report lacks %q", want)
			}
		}
		for _, not := range []string{old.ID, agreed.ID, legalRejected.ID, hidden.ID} {
			if strings.Contains(got, not) {
				t.Errorf("the report names %s, where people agree or which is outside the window", not)
			}
		}
		if after := storeState(t, e); after != before {
			t.Fatalf("policy test wrote: before %s, after %s", before, after)
		}
	})
}

// nil2 is a recipient no string function applies to: the rule fails.
func nil2() any { return 42 }

// storeState is every row policy test could touch, counted.
func storeState(t *testing.T, e *apptest.Env) string {
	t.Helper()
	actions, err := e.Store.ActionList(context.Background(), queue.ActionListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := e.Store.EventList(context.Background(), queue.EventListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	grants, err := e.Store.GrantList(context.Background(), queue.GrantListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	states := ""
	for _, a := range actions {
		states += string(a.State)[:2]
	}
	return fmt.Sprintf("%d actions (%s), %d events (newest %d), %d grants", len(actions), states, len(evs), evs[0].ID, len(grants))
}

// TestToolsCheckShowsRules: tools check lists each tool's rules, and a rule
// that does not compile fails it naming the tool, the rule and the column.
func TestToolsCheckShowsRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(apptest.PolicyTools), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(apptest.PolicyTools, `'payload.currency == "BTC"'`, `'payload.currency == "BTC'`, 1)
	if err := os.WriteFile(bad, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"tools", "check", good}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("tools check: %d %s", code, errOut.String())
	}
	for _, want := range []string{`    rule internal-recipient: approve when payload.to.endsWith("@example.com")`, "    rule no-crypto: reject when"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tools check lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"tools", "check", bad}, strings.NewReader(""), &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), `tool "issue_refund"`) || !strings.Contains(errOut.String(), `rule "no-crypto"`) || !strings.Contains(errOut.String(), "column 21") {
		t.Fatalf("tools check of a broken rule: exit %d\n%s", code, errOut.String())
	}
	if code := run(context.Background(), []string{"policy", "test", bad}, strings.NewReader(""), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), `rule "no-crypto"`) {
		t.Fatalf("policy test of a broken rule: exit %d", code)
	}
}

// TestPolicyTestCountsPlans: approvals policy test judges the window's
// plans as their proposals would be judged under the file's rules, counts
// those that would need a person, be approved or be rejected by rules,
// shows each step's routing, and names the plans a person decided
// otherwise.
func TestPolicyTestCountsPlans(t *testing.T) {
	t.Parallel()
	opts := apptest.EnvOptions{Tools: apptest.ParseTools(t, historyTools, classify.Options{}),
		Clock: testclock.At(time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second))}
	apptest.OnBothStores(t, opts, func(t *testing.T, e *apptest.Env) {
		ctx := context.Background()
		refund := func(order, currency string) queue.PlanStepRequest {
			return queue.PlanStepRequest{Tool: "issue_refund", Payload: json.RawMessage(
				`{"order_id":"` + order + `","line_id":1,"amount":9,"currency":"` + currency + `"}`)}
		}
		mail := func(customer, topic, to string) queue.PlanStepRequest {
			return queue.PlanStepRequest{Tool: "send_customer_email", Payload: json.RawMessage(
				`{"customer_id":"` + customer + `","topic":"` + topic + `","to":"` + to + `"}`)}
		}
		propose := func(title string, steps ...queue.PlanStepRequest) *queue.Plan {
			t.Helper()
			res, err := e.Service.Plans().Propose(ctx, queue.PlanRequest{Title: title, Steps: steps, Agent: "bot", Channel: "api"})
			if err != nil || res.Plan.State != queue.PlanPending {
				t.Fatalf("propose %s: %v (%+v)", title, err, res.Plan)
			}
			return res.Plan
		}
		decide := func(pl *queue.Plan, to queue.PlanState) {
			t.Helper()
			if _, err := e.Service.Plans().Decide(ctx, queue.PlanDecideRequest{ID: pl.ID, To: to, By: apptest.Approver, Note: "because"}); err != nil {
				t.Fatal(err)
			}
		}
		old := propose("before the window", mail("c-0", "t", "a@example.com"))
		e.Clock.Advance(47 * time.Hour)
		// internal-recipient approves the email: the rules approve the
		// plan a person rejected.
		rejected := propose("refund and tell", refund("o-1", "EUR"), mail("c-1", "t", "a@example.com"))
		decide(rejected, queue.PlanRejected)
		// vip-two-people: a person decides.
		e.Clock.Advance(time.Second)
		vip := propose("vip", mail("vip-1", "t", "v@customer.org"))
		// no-crypto rejects step 1: the rules reject what a person approved.
		e.Clock.Advance(time.Second)
		approved := propose("crypto", refund("o-2", "BTC"), mail("c-2", "t", "x@customer.org"))
		decide(approved, queue.PlanApproved)

		tools := filepath.Join(t.TempDir(), "tools.yaml")
		if err := os.WriteFile(tools, []byte(apptest.PolicyTools), 0o600); err != nil {
			t.Fatal(err)
		}
		db := e.DatabaseURL
		if db == "" {
			db = "sqlite:" + e.SQLitePath
		}
		before := storeState(t, e)
		var out, errOut bytes.Buffer
		if code := run(ctx, []string{"policy", "test", "--since", "36h", "--database-url", db, tools}, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("policy test: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		got := out.String()
		t.Log(got)
		// Oldest first.
		if i, j, k := strings.Index(got, rejected.ID), strings.Index(got, vip.ID), strings.Index(got, approved.ID); i > j || j > k {
			t.Errorf("the plans are not listed oldest first")
		}
		for _, want := range []string{
			"plans in the last 36h: 3; 1 would need a person, 1 approved by rules, 1 rejected by rules\n",
			fmt.Sprintf("  plan %s %q (rejected): approved by rules; ann@example.com rejected it\n", rejected.ID, "refund and tell") +
				fmt.Sprintf("    step 1 %-24s %-8s %s\n", "issue_refund", "none", "(no rule)") +
				fmt.Sprintf("    step 2 %-24s %-8s %s\n", "send_customer_email", "approve", "internal-recipient"),
			fmt.Sprintf("  plan %s %q (pending): needs a person\n", vip.ID, "vip") +
				fmt.Sprintf("    step 1 %-24s %-8s %s\n", "send_customer_email", "human", "vip-two-people"),
			fmt.Sprintf("  plan %s %q (approved): rejected by rules; ann@example.com approved it\n", approved.ID, "crypto") +
				fmt.Sprintf("    step 1 %-24s %-8s %s\n", "issue_refund", "reject", "no-crypto") +
				fmt.Sprintf("    step 2 %-24s %-8s %s\n", "send_customer_email", "human", "(no rule)"),
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the report lacks %q", want)
			}
		}
		if strings.Contains(got, old.ID) {
			t.Errorf("the report names %s, a plan before the window", old.ID)
		}
		if after := storeState(t, e); after != before {
			t.Fatalf("policy test wrote: before %s, after %s", before, after)
		}
	})
}
