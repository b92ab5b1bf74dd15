package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
)

// policyEnv runs fn on both stores with apptest.PolicyTools and a fixed clock.
func policyEnv(t *testing.T, fn func(t *testing.T, e *apptest.Env)) {
	t.Helper()
	opts := apptest.EnvOptions{Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{}),
		Clock: testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))}
	apptest.OnBothStores(t, opts, func(t *testing.T, e *apptest.Env) {
		// The approver who grants: a grant approves only while its
		// granting user may decide.
		apptest.AddStaff(t, e.Store, strings.TrimPrefix(apptest.Approver, "user:"), accounts.RoleApprover)
		fn(t, e)
	})
}

func submitAs(t *testing.T, svc *queue.Service, agent, tool string, payload map[string]any) (queue.SubmitResult, error) {
	t.Helper()
	raw, _ := json.Marshal(payload)
	return svc.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: raw, Agent: agent})
}

func created(t *testing.T, svc *queue.Service, tool string, payload map[string]any) *queue.Action {
	t.Helper()
	res, err := submitAs(t, svc, "bot", tool, payload)
	if err != nil || !res.Created {
		t.Fatalf("submit %s %v: %v %+v", tool, payload, err, res)
	}
	return res.Action
}

func email(customer, topic, to string) map[string]any {
	return map[string]any{"customer_id": customer, "topic": topic, "to": to, "subject": "s", "body": "b"}
}

// lastEvent is the newest event of the action.
func lastEvent(t *testing.T, st queue.Store, id string) queue.Event {
	t.Helper()
	evs, err := st.EventList(context.Background(), queue.EventListParams{ActionID: id, Limit: 1})
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of %s: %v %v", id, evs, err)
	}
	return evs[0]
}

func TestPolicyDecidesAtSubmission(t *testing.T) {
	t.Parallel()
	policyEnv(t, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		// approve: approved within the submission, and then executed as any approved action.
		a := created(t, svc, "send_customer_email", email("c-1", "welcome", "ada@example.com"))
		if a.State != queue.StateApproved || apptest.Deref(a.DecidedBy) != "policy:internal-recipient" ||
			apptest.Deref(a.DecisionNote) != `internal-recipient: payload.to.endsWith("@example.com")` || a.ApprovedPayload == nil {
			t.Fatalf("approved by policy: %+v", a)
		}
		ev := lastEvent(t, e.Store, a.ID)
		var data map[string]any
		_ = json.Unmarshal(ev.Data, &data)
		if ev.Kind != queue.EventApproved || ev.Channel != queue.PolicyChannel || ev.Actor != "policy:internal-recipient" ||
			data["rule"] != "internal-recipient" || data["expression"] != `payload.to.endsWith("@example.com")` || data["tools_hash"] != e.Tools.Hash {
			t.Fatalf("the decision's event: %+v %s", ev, ev.Data)
		}
		if got, err := svc.Execute(ctx, a.ID, "bot", "api"); err != nil || got.State != queue.StateInProgress {
			t.Fatalf("execute the policy's approval: %v %+v", err, got)
		}

		// reject: rejected with the rule's note; the intent is held, as for any rejection.
		r := created(t, svc, "send_customer_email", email("c-1", "legal", "ada@customer.org"))
		if r.State != queue.StateRejected || apptest.Deref(r.DecidedBy) != "policy:legal-topics" ||
			apptest.Deref(r.DecisionNote) != "Legal topics go through the legal team." {
			t.Fatalf("rejected by policy: %+v", r)
		}
		if res, err := submitAs(t, svc, "bot", "send_customer_email", email("c-1", "legal", "ada@customer.org")); err != nil || !res.Replayed || res.Action.ID != r.ID {
			t.Fatalf("the rejection replayed: %v %+v", err, res)
		}

		// human: pending, with the rule's required and approvers in place of the tool's.
		v := created(t, svc, "send_customer_email", email("vip-1", "welcome", "v@customer.org"))
		if v.State != queue.StatePending || v.ApprovalsRequired != 2 || v.Spec.Approval.Rule != "vip-two-people" || !v.WaitsForPerson() {
			t.Fatalf("vip: %+v", v)
		}
		if res, err := svc.Decide(ctx, queue.DecideRequest{ID: v.ID, To: queue.StateApproved, By: "user:cy@example.com"}); err != nil || res.Action.State != queue.StatePending {
			t.Fatalf("an account manager's approval counts once: %v %+v", err, res.Action)
		}
		if kind := lastEvent(t, e.Store, v.ID); kind.Kind != queue.EventApprovalCounted {
			t.Fatalf("last event %s", kind.Kind)
		}

		// no rule: pending under the tool's own rule.
		p := created(t, svc, "send_customer_email", email("c-2", "welcome", "b@customer.org"))
		if p.State != queue.StatePending || p.ApprovalsRequired != 1 || p.DecidedBy != nil || p.Spec.Approval.Rule != "" {
			t.Fatalf("no rule: %+v", p)
		}
		if _, err := svc.Decide(ctx, queue.DecideRequest{ID: p.ID, To: queue.StateApproved, By: "user:cy@example.com"}); queue.ErrorCode(err) != queue.CodeForbidden {
			t.Fatalf("an account manager outside the tool's approvers: %v", err)
		}
	})
}

// An exactly-once tool claims at once unless a rule says otherwise; a
// human rule makes it pending → approved → in_progress → done.
func TestPolicyOnExactlyOnce(t *testing.T) {
	t.Parallel()
	policyEnv(t, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		small := created(t, svc, "issue_refund", map[string]any{"order_id": "o-1", "line_id": 1, "amount": 20, "currency": "EUR"})
		if small.State != queue.StateInProgress || small.ClaimedAt == nil {
			t.Fatalf("no rule: %+v", small)
		}
		if _, err := svc.Execute(ctx, small.ID, "bot", "api"); queue.ErrorCode(err) != queue.CodeInvalidTransition {
			t.Fatalf("execute a claim: %v", err)
		}
		large := created(t, svc, "issue_refund", map[string]any{"order_id": "o-2", "line_id": 1, "amount": 600, "currency": "EUR"})
		if large.State != queue.StatePending || large.ClaimedAt != nil || !large.WaitsForPerson() || large.ExpiresAt == nil {
			t.Fatalf("large refund: %+v", large)
		}
		if _, err := svc.Execute(ctx, large.ID, "bot", "api"); queue.ErrorCode(err) != queue.CodeInvalidTransition {
			t.Fatalf("execute before approval: %v", err)
		}
		if _, err := svc.Decide(ctx, queue.DecideRequest{ID: large.ID, To: queue.StateApproved, By: apptest.Approver}); queue.ErrorCode(err) != queue.CodeForbidden {
			t.Fatalf("approval outside finance: %v", err)
		}
		if _, err := svc.Decide(ctx, queue.DecideRequest{ID: large.ID, To: queue.StateApproved, By: "user:fin@example.com"}); err != nil {
			t.Fatal(err)
		}
		// A retry while approved replays; only execute claims it.
		if res, err := submitAs(t, svc, "bot", "issue_refund", map[string]any{"order_id": "o-2", "line_id": 1, "amount": 600, "currency": "EUR"}); err != nil || !res.Replayed || res.Action.State != queue.StateApproved {
			t.Fatalf("retry while approved: %v %+v", err, res)
		}
		got, err := svc.Execute(ctx, large.ID, "bot", "api")
		if err != nil || got.State != queue.StateInProgress {
			t.Fatalf("execute: %v %+v", err, got)
		}
		if res, err := svc.Complete(ctx, large.ID, "bot", json.RawMessage(`{"refund_id":"re_9"}`), "api"); err != nil || res.Action.State != queue.StateDone {
			t.Fatalf("complete: %v %+v", err, res)
		}
		btc := created(t, svc, "issue_refund", map[string]any{"order_id": "o-3", "line_id": 1, "amount": 20, "currency": "BTC"})
		if btc.State != queue.StateRejected || btc.ClaimedAt != nil || apptest.Deref(btc.DecisionNote) != "No refunds in BTC." {
			t.Fatalf("BTC: %+v", btc)
		}
	})
}

// A rule whose evaluation fails sends the action to a person, and the
// action says which rule (TestPolicyFailsClosed tries every way in).
func TestPolicyErrorWarns(t *testing.T) {
	t.Parallel()
	policyEnv(t, func(t *testing.T, e *apptest.Env) {
		a := created(t, e.Service, "send_customer_email", map[string]any{"customer_id": "c-1", "topic": "welcome"})
		if a.State != queue.StatePending || len(a.Warnings) != 1 || a.Warnings[0] != "policy_error:internal-recipient" {
			t.Fatalf("missing field: %+v", a)
		}
		evs, _ := e.Store.EventList(t.Context(), queue.EventListParams{ActionID: a.ID, Limit: 5})
		if len(evs) != 1 || !strings.Contains(string(evs[0].Data), "no such key: to") {
			t.Fatalf("the submitted event: %+v", evs)
		}
		// A number where the rule wants a string: a person decides too, even
		// though a later rule (legal-topics) would reject it.
		b := created(t, e.Service, "send_customer_email", map[string]any{"customer_id": "c-2", "topic": "legal", "to": 7})
		if b.State != queue.StatePending || len(b.Warnings) != 1 || b.Warnings[0] != "policy_error:internal-recipient" {
			t.Fatalf("wrong type: %+v", b)
		}
	})
}

// A policy's decision is routed like a person's: action.approved to the
// tool's channels, never action.pending.
func TestPolicyDecisionsAreRouted(t *testing.T) {
	t.Parallel()
	policyEnv(t, func(t *testing.T, e *apptest.Env) {
		ctx := t.Context()
		approved := created(t, e.Service, "send_customer_email", email("c-1", "welcome", "ada@example.com"))
		rejected := created(t, e.Service, "send_customer_email", email("c-2", "lawsuit", "x@customer.org"))
		pending := created(t, e.Service, "send_customer_email", email("c-3", "welcome", "x@customer.org"))
		if _, err := e.Outbox(maintenance.OutboxConfig{}).FanOut(ctx, 100); err != nil {
			t.Fatal(err)
		}
		for a, want := range map[*queue.Action]string{approved: classify.EventActionApproved, rejected: classify.EventActionRejected,
			pending: classify.EventActionPending} {
			list, err := e.Store.NotificationList(ctx, a.ID)
			if err != nil || len(list) != 1 || list[0].Type != want || list[0].Channel != "ops-events" {
				t.Errorf("%s: notifications %+v %v, want one %s", a.IntentKey, list, err, want)
			}
		}
	})
}

func approveWithGrant(ctx context.Context, svc *queue.Service, id, by string, g queue.GrantRequest) (queue.DriveResult, error) {
	return svc.Decide(ctx, queue.DecideRequest{ID: id, To: queue.StateApproved, By: by, Grant: &g})
}

func TestGrantThroughTheService(t *testing.T) {
	t.Parallel()
	policyEnv(t, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		first := created(t, svc, "send_customer_email", email("c-7", "welcome", "c7@customer.org"))
		res, err := approveWithGrant(ctx, svc, first.ID, apptest.Approver, queue.GrantRequest{For: 2 * time.Hour, Fields: []string{"customer_id"}})
		if err != nil || res.Action.State != queue.StateApproved {
			t.Fatalf("approve and allow similar: %v %+v", err, res)
		}
		grants, err := e.Store.GrantList(ctx, queue.GrantListParams{Active: new(true), Now: e.Clock.Now(), Limit: 10})
		if err != nil || len(grants) != 1 {
			t.Fatalf("grants: %v %v", grants, err)
		}
		g := grants[0]
		if g.ActionID != first.ID || g.GrantedBy != apptest.Approver || g.Agent != "agent:bot" || g.MaxUses != queue.DefaultGrantUses ||
			!g.ExpiresAt.Equal(e.Clock.Now().Add(2*time.Hour)) || len(g.Fields) != 1 || string(g.Fields[0].Value) != `"c-7"` {
			t.Fatalf("the grant: %+v", g)
		}
		if e.EventCount(first.ID, queue.EventGrantCreated) != 1 {
			t.Fatal("no grant_created event")
		}

		next := created(t, svc, "send_customer_email", email("c-7", "refund-update", "c7@customer.org"))
		if next.State != queue.StateApproved || apptest.Deref(next.DecidedBy) != "grant:"+g.ID || next.GrantID != g.ID ||
			len(next.Approvals) != 1 || next.Approvals[0].By != apptest.Approver {
			t.Fatalf("approved by the grant: %+v", next)
		}
		if got, err := svc.Execute(ctx, next.ID, "bot", "api"); err != nil || got.State != queue.StateInProgress {
			t.Fatalf("execute: %v %+v", err, got)
		}
		if other := created(t, svc, "send_customer_email", email("c-8", "welcome", "c8@customer.org")); other.State != queue.StatePending {
			t.Fatalf("another customer: %+v", other)
		}
		if res, err := submitAs(t, svc, "other-bot", "send_customer_email", email("c-7", "promo", "c7@customer.org")); err != nil || res.Action.State != queue.StatePending {
			t.Fatalf("another agent: %v %+v", err, res)
		}
		// Rules win over grants: reject and human rules, and approve rules decide themselves.
		if r := created(t, svc, "send_customer_email", email("c-7", "legal", "c7@customer.org")); r.State != queue.StateRejected || apptest.Deref(r.DecidedBy) != "policy:legal-topics" {
			t.Fatalf("reject rule against a grant: %+v", r)
		}
		if ap := created(t, svc, "send_customer_email", email("c-7", "internal", "c7@example.com")); apptest.Deref(ap.DecidedBy) != "policy:internal-recipient" {
			t.Fatalf("approve rule against a grant: %+v", ap)
		}
		vg := created(t, svc, "send_customer_email", email("vip-9", "welcome", "v@customer.org"))
		if _, err := approveWithGrant(ctx, svc, vg.ID, apptest.Approver, queue.GrantRequest{For: time.Hour}); queue.ErrorCode(err) != queue.CodeInvalidRequest {
			t.Fatalf("a grant from an action that needs two approvals: %v", err)
		}
		got, err := e.Store.GrantGetByID(ctx, g.ID)
		if err != nil || got.Uses != 1 {
			t.Fatalf("uses: %+v %v", got, err)
		}

		// Revoking stops it at once; only the granting user, ops and admins may.
		if _, err := svc.RevokeGrant(ctx, g.ID, "user:bob@example.com", false); queue.ErrorCode(err) != queue.CodeForbidden {
			t.Fatalf("revoke by another approver: %v", err)
		}
		if _, err := svc.RevokeGrant(ctx, g.ID, apptest.Approver, false); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.RevokeGrant(ctx, g.ID, "user:ops@example.com", true); queue.ErrorCode(err) != queue.CodeAlreadyDecided {
			t.Fatalf("revoke twice: %v", err)
		}
		if after := created(t, svc, "send_customer_email", email("c-7", "after", "c7@customer.org")); after.State != queue.StatePending {
			t.Fatalf("after revocation: %+v", after)
		}
	})
}

// A grant that the tool does not allow, or beyond its limits, refuses the
// whole decision: nothing changes, the action stays pending.
func TestGrantRefusals(t *testing.T) {
	t.Parallel()
	policyEnv(t, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		mail := func(topic string) *queue.Action {
			return created(t, svc, "send_customer_email", email("c-1", topic, "x@customer.org"))
		}
		edited, _ := json.Marshal(email("c-1", "edited", "y@customer.org"))
		for _, tc := range []struct {
			name   string
			action *queue.Action
			req    queue.GrantRequest
			edit   json.RawMessage
			want   string
		}{
			{"grants: false", created(t, svc, "post_update", map[string]any{"topic": "t"}), queue.GrantRequest{For: time.Hour}, nil, "does not allow grants"},
			{"required 2", created(t, svc, "quorum_mail", map[string]any{"id": "q"}), queue.GrantRequest{For: time.Hour}, nil, "needs 2 approvals"},
			{"beyond max", mail("max"), queue.GrantRequest{For: 9 * time.Hour}, nil, "grants.max 8h"},
			{"beyond max_uses", mail("uses"), queue.GrantRequest{For: time.Hour, Uses: 101}, nil, "max_uses 100"},
			{"unknown field", mail("field"), queue.GrantRequest{For: time.Hour, Fields: []string{"customer_id", "nope"}}, nil, `no field "nope"`},
			{"array index", mail("index"), queue.GrantRequest{For: time.Hour, Fields: []string{"to.0"}}, nil, "no array indexes"},
			{"too short", mail("short"), queue.GrantRequest{For: time.Second}, nil, "at least 1m"},
			{"edited", created(t, svc, "send_customer_email", email("c-1", "edited", "x@customer.org")), queue.GrantRequest{For: time.Hour}, edited, "edited payload"},
			{"exactly-once", created(t, svc, "issue_refund", map[string]any{"order_id": "o", "line_id": 1, "amount": 900}), queue.GrantRequest{For: time.Hour}, nil, "only at-most-once"},
			// What no person saw, no grant approves: no grant from an action
			// with a warning, nor of a tool the tools file does not name.
			{"invisible characters", created(t, svc, "send_customer_email", map[string]any{"customer_id": "c-1", "topic": "hidden",
				"to": "x@customer.org", "subject": "s", "body": "pay \u202eto\u202c"}), queue.GrantRequest{For: time.Hour}, nil, "carries the warning invisible_characters"},
			{"unregistered", unregistered(t, svc, "grant:unregistered"), queue.GrantRequest{For: time.Hour}, nil, "is not in the tools file"},
		} {
			by := apptest.Approver
			if tc.action.Tool == "issue_refund" {
				by = "user:fin@example.com"
			}
			g := tc.req
			_, err := svc.Decide(ctx, queue.DecideRequest{ID: tc.action.ID, To: queue.StateApproved, By: by, Grant: &g, Payload: tc.edit})
			if queue.ErrorCode(err) != queue.CodeInvalidRequest || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want invalid_request saying %q", tc.name, err, tc.want)
			}
			if a, _ := e.Store.ActionGetByID(ctx, tc.action.ID); a.State != queue.StatePending {
				t.Errorf("%s: the action is %s, want pending", tc.name, a.State)
			}
		}
		if grants, _ := e.Store.GrantList(ctx, queue.GrantListParams{Now: e.Clock.Now()}); len(grants) != 0 {
			t.Fatalf("refusals created grants: %+v", grants)
		}
	})
}

// unregistered submits a pending action of a tool the tools file does not
// name, with the key it needs.
func unregistered(t *testing.T, svc *queue.Service, key string) *queue.Action {
	t.Helper()
	res, err := svc.Submit(t.Context(), queue.SubmitRequest{Tool: "not_in_the_file", Payload: json.RawMessage(`{"x":1}`), Agent: "bot", IntentKey: key})
	if err != nil || !res.Created || res.Action.State != queue.StatePending {
		t.Fatalf("submit an unregistered tool: %v %+v", err, res)
	}
	return res.Action
}

// The default grant has a use limit: DefaultGrantUses, or the tool's
// grants.max_uses when that is smaller.
func TestGrantDefaultUseLimit(t *testing.T) {
	t.Parallel()
	opts := apptest.EnvOptions{Tools: apptest.ParseTools(t, `
tools:
  hundred: { intent: "h:{id}", approval: { grants: { max: 8h, max_uses: 100 } } }
  unlimited: { intent: "u:{id}" }
  five: { intent: "f:{id}", approval: { grants: { max: 8h, max_uses: 5 } } }
`, classify.Options{}), Clock: testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))}
	apptest.OnBothStores(t, opts, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		apptest.AddStaff(t, e.Store, "ann@example.com", accounts.RoleApprover)
		for _, tc := range []struct {
			tool string
			want int
		}{
			{"hundred", queue.DefaultGrantUses},
			{"unlimited", queue.DefaultGrantUses},
			{"five", 5},
		} {
			a := created(t, svc, tc.tool, map[string]any{"id": "1"})
			if _, err := approveWithGrant(ctx, svc, a.ID, apptest.Approver, queue.GrantRequest{For: time.Hour}); err != nil {
				t.Fatalf("%s: %v", tc.tool, err)
			}
			grants, err := e.Store.GrantList(ctx, queue.GrantListParams{Now: e.Clock.Now(), Limit: 10})
			if err != nil || len(grants) == 0 {
				t.Fatalf("%s: grants %v", tc.tool, err)
			}
			var got *queue.Grant
			for _, g := range grants {
				if g.ActionID == a.ID {
					got = g
				}
			}
			if got == nil || got.MaxUses != tc.want {
				t.Fatalf("%s: the default grant: %+v, want max_uses %d", tc.tool, got, tc.want)
			}
		}
	})
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	policyEnv(t, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		dry := func(tool string, payload map[string]any) queue.DryRunResult {
			t.Helper()
			raw, _ := json.Marshal(payload)
			r, err := svc.DryRun(ctx, queue.SubmitRequest{Tool: tool, Payload: raw, Agent: "bot"})
			if err != nil {
				t.Fatalf("dry run %s %s: %v", tool, raw, err)
			}
			return r
		}
		// Held intents and a grant to find.
		held := created(t, svc, "send_customer_email", email("c-1", "held", "x@customer.org"))
		claim := created(t, svc, "issue_refund", map[string]any{"order_id": "o-1", "line_id": 1, "amount": 5, "currency": "EUR"})
		granting := created(t, svc, "send_customer_email", email("c-9", "welcome", "x@customer.org"))
		if _, err := approveWithGrant(ctx, svc, granting.ID, apptest.Approver, queue.GrantRequest{For: time.Hour, Fields: []string{"customer_id"}}); err != nil {
			t.Fatal(err)
		}
		grants, _ := e.Store.GrantList(ctx, queue.GrantListParams{Now: e.Clock.Now()})
		before := rowCounts(t, e.Store)

		for _, tc := range []struct {
			name            string
			tool            string
			payload         map[string]any
			outcome, rule   string
			grant, actionID string
			state           queue.State
		}{
			{"rule approves", "send_customer_email", email("c-2", "t", "a@example.com"), queue.DryRunApprove, "internal-recipient", "", "", queue.StateApproved},
			{"rule rejects", "send_customer_email", email("c-2", "legal", "a@customer.org"), queue.DryRunReject, "legal-topics", "", "", queue.StateRejected},
			{"human rule", "send_customer_email", email("vip-2", "t", "a@customer.org"), queue.DryRunHuman, "vip-two-people", "", "", queue.StatePending},
			{"a person", "send_customer_email", email("c-2", "t", "a@customer.org"), queue.DryRunHuman, "", "", "", queue.StatePending},
			{"grant", "send_customer_email", email("c-9", "next", "a@customer.org"), queue.DryRunApprove, "", grants[0].ID, "", queue.StateApproved},
			{"claim", "issue_refund", map[string]any{"order_id": "o-2", "line_id": 1, "amount": 5, "currency": "EUR"}, queue.DryRunClaim, "", "", "", queue.StateInProgress},
			{"human on exactly-once", "issue_refund", map[string]any{"order_id": "o-2", "line_id": 1, "amount": 501, "currency": "EUR"}, queue.DryRunHuman, "large-refund", "", "", queue.StatePending},
			{"record", "invalidate_cache", map[string]any{"key": "k"}, queue.DryRunRecord, "", "", "", queue.StateRecorded},
			{"replay", "send_customer_email", email("c-1", "held", "x@customer.org"), queue.DryRunReplay, "", "", held.ID, queue.StatePending},
			{"in progress", "issue_refund", map[string]any{"order_id": "o-1", "line_id": 1, "amount": 5, "currency": "EUR"}, queue.DryRunInProgress, "", "", claim.ID, queue.StateInProgress},
			{"conflict", "issue_refund", map[string]any{"order_id": "o-1", "line_id": 1, "amount": 6, "currency": "EUR"}, queue.DryRunConflict, "", "", claim.ID, queue.StateInProgress},
		} {
			r := dry(tc.tool, tc.payload)
			if r.Outcome != tc.outcome || r.Rule != tc.rule || r.Grant != tc.grant || r.Action == nil || r.Action.ID != tc.actionID || r.Action.State != tc.state {
				t.Errorf("%s: %+v (action %+v), want %s rule %q grant %q", tc.name, r, r.Action, tc.outcome, tc.rule, tc.grant)
			}
		}
		raw, _ := json.Marshal(map[string]any{"order_id": "x"})
		if _, err := svc.DryRun(ctx, queue.SubmitRequest{Tool: "issue_refund", Payload: raw, Agent: "bot"}); queue.ErrorCode(err) != queue.CodeInvalidPayload {
			t.Fatalf("a dry run of a bad payload: %v", err)
		}
		if after := rowCounts(t, e.Store); after != before {
			t.Fatalf("the dry runs wrote: %s, then %s", before, after)
		}
	})
}

func rowCounts(t *testing.T, st queue.Store) string {
	t.Helper()
	actions, err := st.ActionList(t.Context(), queue.ActionListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.EventList(t.Context(), queue.EventListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	grants, err := st.GrantList(t.Context(), queue.GrantListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	uses := 0
	for _, g := range grants {
		uses += g.Uses
	}
	return fmt.Sprintf("%d actions, %d events, %d grants used %d times", len(actions), len(evs), len(grants), uses)
}
