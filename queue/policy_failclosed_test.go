package queue_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// failClosedTools have rules an agent can make fail: a human rule over a
// number, a reject rule with a costly comprehension, and a later rule that
// approves everything; an exactly-once refund; and a tool that takes grants.
const failClosedTools = `
groups:
  support-leads: [ann@example.com, bob@example.com]
  finance: [fin@example.com]
tools:
  mail:
    intent: "mail:{id}"
    approval:
      approvers: [support-leads]
      policy:
        - { name: costly, when: 'has(payload.items) && payload.items.all(x, payload.items.all(y, x == y || x != y))', decide: reject, note: "No." }
        - { name: big-amount, when: 'payload.amount > 500', decide: human, approvers: [finance] }
        - { name: everything-else, when: 'true', decide: approve }
  refund:
    class: exactly-once
    intent: "refund:{id}"
    approval:
      policy:
        - { name: large-refund, when: 'double(payload.amount) > 500.0', decide: human, approvers: [finance] }
        - { name: no-btc, when: 'payload.currency == "BTC"', decide: reject, note: "No refunds in BTC." }
  notice:
    intent: "notice:{id}"
    approval:
      approvers: [support-leads]
      policy:
        - { name: big, when: 'payload.amount > 500', decide: human, approvers: [finance] }
`

// bigList is a payload field whose nested comprehension passes the cost limit.
func bigList() string {
	items := make([]string, 3000)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	b, _ := json.Marshal(items)
	return string(b)
}

func submitRaw(t *testing.T, svc *queue.Service, tool, payload string) *queue.Action {
	t.Helper()
	res, err := svc.Submit(t.Context(), queue.SubmitRequest{Tool: tool, Payload: json.RawMessage(payload), Agent: "bot"})
	if err != nil || !res.Created {
		t.Fatalf("submit %s %.80s: %v %+v", tool, payload, err, res)
	}
	return res.Action
}

// A rule that cannot be evaluated for a payload sends the action to a
// person, whichever way the agent makes it fail (a missing field, text
// for a number, a number beyond a double, the cost limit), on at-most-once
// and exactly-once tools, with a later approve rule and with an active
// grant: nothing after the failed rule decides. A failed human rule routes
// by its own approvers.
func TestPolicyFailsClosed(t *testing.T) {
	t.Parallel()
	opts := apptest.EnvOptions{Tools: apptest.ParseTools(t, failClosedTools, classify.Options{}),
		Clock: testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))}
	apptest.OnBothStores(t, opts, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		// Sanity: a payload that evaluates is approved by the later rule.
		if a := submitRaw(t, svc, "mail", `{"id":"ok","amount":20}`); a.State != queue.StateApproved ||
			apptest.Deref(a.DecidedBy) != "policy:everything-else" {
			t.Fatalf("an evaluable payload: %+v", a)
		}
		pendingUnder := func(t *testing.T, a *queue.Action, rule string, approvers ...string) {
			t.Helper()
			if a.State != queue.StatePending || a.DecidedBy != nil || a.ClaimedAt != nil || a.GrantID != "" {
				t.Fatalf("%s: state %s decided_by %v claimed %v grant %q, want pending for a person", a.IntentKey, a.State, a.DecidedBy, a.ClaimedAt, a.GrantID)
			}
			if !slices.Contains(a.Warnings, "policy_error:"+rule) {
				t.Fatalf("%s: warnings %v, want policy_error:%s", a.IntentKey, a.Warnings, rule)
			}
			if a.Spec.Approval == nil || a.Spec.Approval.Rule != rule || a.Spec.Approval.Decision != classify.DecideHuman {
				t.Fatalf("%s: routed under %+v, want the human rule %s", a.IntentKey, a.Spec.Approval, rule)
			}
			if !slices.Equal(a.Spec.Approval.Approvers, approvers) {
				t.Fatalf("%s: approvers %v, want %v", a.IntentKey, a.Spec.Approval.Approvers, approvers)
			}
		}
		for _, tc := range []struct{ name, payload, rule, why string }{
			{"missing", `{"id":"m1"}`, "big-amount", "no such key: amount"},
			{"text", `{"id":"m2","amount":"5000"}`, "big-amount", "no such overload"},
			{"beyond-double", `{"id":"m3","amount":1e309}`, "big-amount", "does not fit a double"},
			// The cost limit, or on a loaded machine the time limit first
			// (classify.PolicyTimeLimit): either fails the rule closed.
			{"cost", `{"id":"m4","amount":20,"items":` + bigList() + `}`, "costly", "limit"},
		} {
			a := submitRaw(t, svc, "mail", tc.payload)
			if tc.rule == "big-amount" {
				pendingUnder(t, a, tc.rule, "finance") // the failed human rule routes it
				if _, err := svc.Decide(ctx, queue.DecideRequest{ID: a.ID, To: queue.StateApproved, By: apptest.Approver}); queue.ErrorCode(err) != queue.CodeForbidden {
					t.Fatalf("%s: a support lead decided what the finance rule routes: %v", tc.name, err)
				}
			} else {
				pendingUnder(t, a, tc.rule, "support-leads") // a failed reject rule keeps the tool's routing
			}
			evs, err := e.Store.EventList(ctx, queue.EventListParams{ActionID: a.ID, Limit: 5})
			if err != nil || len(evs) != 1 || evs[0].Kind != queue.EventSubmitted || !strings.Contains(string(evs[0].Data), tc.why) {
				t.Fatalf("%s: events %+v %v, want the submitted event saying %q", tc.name, evs, err, tc.why)
			}
			dry, err := svc.DryRun(ctx, queue.SubmitRequest{Tool: "mail", Payload: json.RawMessage(strings.Replace(tc.payload, `"m`, `"d`, 1)), Agent: "bot"})
			if err != nil || dry.Outcome != queue.DryRunHuman {
				t.Fatalf("%s: dry run %v %+v, want human", tc.name, err, dry)
			}
		}

		// Exactly-once: claimed at once only when every rule evaluated.
		if a := submitRaw(t, svc, "refund", `{"id":"r0","amount":20,"currency":"EUR"}`); a.State != queue.StateInProgress {
			t.Fatalf("an evaluable refund: %+v", a)
		}
		pendingUnder(t, submitRaw(t, svc, "refund", `{"id":"r1","currency":"EUR"}`), "large-refund", "finance")
		pendingUnder(t, submitRaw(t, svc, "refund", `{"id":"r2","amount":1e309,"currency":"EUR"}`), "large-refund", "finance")
		// A failed reject rule on an exactly-once tool: a person, under the tool's routing.
		r3 := submitRaw(t, svc, "refund", `{"id":"r3","amount":20}`)
		pendingUnder(t, r3, "no-btc")
		if !r3.WaitsForPerson() || !r3.Gated() {
			t.Fatalf("r3 is not gated: %+v", r3)
		}
		if _, err := svc.Execute(ctx, r3.ID, "bot", "api"); queue.ErrorCode(err) != queue.CodeInvalidTransition {
			t.Fatalf("execute before a person approved: %v", err)
		}

		// An active grant of any payload approves what evaluates, and nothing
		// whose rule failed.
		apptest.AddStaff(t, e.Store, "ann@example.com", accounts.RoleApprover)
		first := submitRaw(t, svc, "notice", `{"id":"g0","amount":1}`)
		if _, err := approveWithGrant(ctx, svc, first.ID, apptest.Approver, queue.GrantRequest{For: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if a := submitRaw(t, svc, "notice", `{"id":"g1","amount":2}`); a.State != queue.StateApproved || a.GrantID == "" {
			t.Fatalf("the grant approves an evaluable payload: %+v", a)
		}
		pendingUnder(t, submitRaw(t, svc, "notice", `{"id":"g2"}`), "big", "finance")
		pendingUnder(t, submitRaw(t, svc, "notice", `{"id":"g3","amount":"5000"}`), "big", "finance")
		pendingUnder(t, submitRaw(t, svc, "notice", `{"id":"g4","amount":-1e309}`), "big", "finance")
	})
}

// What no person saw, no rule approves: an action with invisible
// characters goes to a person although an approve rule matches it or an
// active grant covers it; a reject rule still rejects it.
func TestUnseenRisksGoToAPerson(t *testing.T) {
	t.Parallel()
	opts := apptest.EnvOptions{Tools: apptest.ParseTools(t, failClosedTools, classify.Options{}),
		Clock: testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))}
	apptest.OnBothStores(t, opts, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		a := submitRaw(t, svc, "mail", `{"id":"i1","amount":20,"text":"pay \u202eevil"}`)
		if a.State != queue.StatePending || a.DecidedBy != nil || !slices.Contains(a.Warnings, queue.WarningInvisibleCharacters) {
			t.Fatalf("approve rule over invisible characters: %+v", a)
		}
		if a.Spec.Approval == nil || a.Spec.Approval.Rule != "everything-else" || a.Spec.Approval.Decision != classify.DecideHuman ||
			!slices.Equal(a.Spec.Approval.Approvers, []string{"support-leads"}) {
			t.Fatalf("routing: %+v", a.Spec.Approval)
		}
		ev := lastEvent(t, e.Store, a.ID)
		if ev.Kind != queue.EventPolicyHuman || !strings.Contains(string(ev.Data), `"held_for":["invisible_characters"]`) {
			t.Fatalf("the rule's event: %+v %s", ev, ev.Data)
		}
		// Exactly-once: the human rule still routes; no rule: claimed as before
		// (nobody approves an exactly-once claim).
		if r := submitRaw(t, svc, "refund", `{"id":"i2","amount":20,"currency":"BTC","memo":"\u200b"}`); r.State != queue.StateRejected {
			t.Fatalf("a reject rule over invisible characters: %+v", r)
		}
		first := submitRaw(t, svc, "notice", `{"id":"i3","amount":1}`)
		if _, err := approveWithGrant(ctx, svc, first.ID, apptest.Approver, queue.GrantRequest{For: time.Hour}); err != nil {
			t.Fatal(err)
		}
		g := submitRaw(t, svc, "notice", `{"id":"i4","amount":1,"text":"tag\udb40\udc41"}`)
		if g.State != queue.StatePending || g.GrantID != "" {
			t.Fatalf("a grant over invisible characters: %+v", g)
		}
		dry, err := svc.DryRun(ctx, queue.SubmitRequest{Tool: "notice", Payload: json.RawMessage(`{"id":"i5","amount":1,"text":"\u2066x"}`), Agent: "bot"})
		if err != nil || dry.Outcome != queue.DryRunHuman || dry.Grant != "" {
			t.Fatalf("dry run: %v %+v", err, dry)
		}
	})
}

// attemptTools: a retry of a key needs a person (attempt reads the key's
// history), and an at-least-once tool whose informational key is the
// agent's to choose.
const attemptTools = `
groups:
  support-leads: [ann@example.com]
tools:
  send:
    approval:
      approvers: [support-leads]
      policy:
        - { name: first-try, when: 'attempt == 1 && payload.n == 1', decide: approve }
  ping:
    class: at-least-once
`

// The attempt a rule reads is the one the new action is stored with, however
// many at-least-once actions an agent recorded under the key since its last
// attempt: they take no attempts and must not hide the key's history.
func TestPolicyAttemptSeesTheKeysHistory(t *testing.T) {
	t.Parallel()
	opts := apptest.EnvOptions{Tools: apptest.ParseTools(t, attemptTools, classify.Options{}),
		Clock: testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))}
	apptest.OnBothStores(t, opts, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		submit := func(tool, payload string) *queue.Action {
			t.Helper()
			e.Clock.Advance(time.Second)
			res, err := svc.Submit(ctx, queue.SubmitRequest{Tool: tool, Payload: json.RawMessage(payload), IntentKey: "send:k1", Agent: "bot"})
			if err != nil || !res.Created {
				t.Fatalf("submit %s: %v %+v", tool, err, res)
			}
			return res.Action
		}
		first := submit("send", `{"n":0}`)
		if first.State != queue.StatePending || first.Attempt != 1 {
			t.Fatalf("first: %+v", first)
		}
		if _, err := svc.Decide(ctx, queue.DecideRequest{ID: first.ID, To: queue.StateChangesRequested, By: "user:ann@example.com", Note: "n must be 1"}); err != nil {
			t.Fatal(err)
		}
		for range 105 {
			submit("ping", `{}`)
		}
		second := submit("send", `{"n":1}`)
		if second.Attempt != 2 || second.State != queue.StatePending || second.DecidedBy != nil {
			t.Fatalf("second attempt: attempt %d state %s decided_by %v, want attempt 2 pending (first-try reads attempt 2)",
				second.Attempt, second.State, apptest.Deref(second.DecidedBy))
		}
	})
}
