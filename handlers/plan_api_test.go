package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// planOf decodes a plan answer.
func planOf(t *testing.T, r apptest.Resp) queue.Plan {
	t.Helper()
	var pl queue.Plan
	if err := json.Unmarshal(r.Body, &pl); err != nil {
		t.Fatalf("decode plan from %s: %v", r.Body, err)
	}
	return pl
}

func mailStep(customer, topic, to string) map[string]any {
	return map[string]any{"tool": "send_customer_email", "payload": map[string]any{
		"customer_id": customer, "topic": topic, "to": to, "subject": "Your refund", "body": "It is on its way."}}
}

// stepBody is the submission of a step naming plan id.
func stepBody(step map[string]any, id string) map[string]any {
	b := map[string]any{"plan": id}
	for k, v := range step {
		b[k] = v
	}
	return b
}

func approvePlan(t *testing.T, e *apptest.API, id, email string) (queue.PlanDecideResult, error) {
	t.Helper()
	apptest.AddStaff(t, e.Store, email, accounts.RoleApprover)
	return e.Service.Plans().Decide(context.Background(), queue.PlanDecideRequest{ID: id, To: queue.PlanApproved, By: "user:" + email})
}

// TestPlanOverHTTP walks section 19 through the REST API on both stores:
// one decision for three steps, each then let through once and performed
// as its class says; refusals store nothing.
func TestPlanOverHTTP(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		refund := apptest.RefundBody("o-1", 10)
		mail := mailStep("c-1", "refund", "c@customer.org")
		cache := map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"key": "order:o-1"}, "intent_key": "cache:o-1"}
		body := map[string]any{"title": "Refund line 1 and tell the customer", "steps": []any{refund, mail, cache}, "expires_after": "2h"}

		dry := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans?dry_run=true", body)
		if dry.Status != http.StatusOK || planOf(t, dry).State != queue.PlanPending {
			t.Fatalf("dry run: %d %s", dry.Status, dry.Body)
		}
		if list, _ := e.Store.PlanList(context.Background(), queue.PlanListParams{Limit: 10}); len(list) != 0 {
			t.Fatalf("a dry run stored %d plans", len(list))
		}

		r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", body)
		if r.Status != http.StatusCreated {
			t.Fatalf("propose: %d %s", r.Status, r.Body)
		}
		pl := planOf(t, r)
		if pl.State != queue.PlanPending || pl.Agent != "agent:bot" || len(pl.Steps) != 3 || pl.ApprovalsRequired != 1 {
			t.Fatalf("plan %+v", pl)
		}
		for i, want := range []string{queue.StepNone, queue.StepHuman, queue.StepNone} {
			if pl.Steps[i].Decision != want || pl.Steps[i].N != i+1 {
				t.Fatalf("step %d: decision %s, want %s", i+1, pl.Steps[i].Decision, want)
			}
		}

		// Not approved yet: refused, nothing stored.
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(refund, pl.ID))
		if r.Status != http.StatusConflict || r.Problem(t).Code != queue.CodePlanNotApproved {
			t.Fatalf("step of a pending plan: %d %s", r.Status, r.Body)
		}
		// Only a person who may decide every human step decides it.
		apptest.AddStaff(t, e.Store, "fin@example.com", accounts.RoleApprover)
		if _, err := e.Service.Plans().Decide(context.Background(), queue.PlanDecideRequest{ID: pl.ID, To: queue.PlanApproved, By: "user:fin@example.com"}); queue.ErrorCode(err) != queue.CodeForbidden {
			t.Fatalf("approval by someone outside support-leads: %v", err)
		}
		res, err := approvePlan(t, e, pl.ID, "ann@example.com")
		if err != nil || res.Plan.State != queue.PlanApproved {
			t.Fatalf("approve: %+v %v", res, err)
		}

		// A step that differs in one field is refused, naming the step and the field.
		changed := mailStep("c-1", "refund", "c@customer.org")
		changed["payload"].(map[string]any)["subject"] = "Something else"
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(changed, pl.ID))
		if p := r.Problem(t); r.Status != http.StatusUnprocessableEntity || p.Code != queue.CodeNotInPlan ||
			!strings.Contains(p.Detail, "step 2") || !strings.Contains(p.Detail, "/subject") {
			t.Fatalf("a changed step: %d %s", r.Status, r.Body)
		}
		if list, _ := e.Store.ActionList(context.Background(), queue.ActionListParams{IntentKey: "email:c-1:refund", Limit: 5}); len(list) != 0 {
			t.Fatalf("a refused step stored %d actions", len(list))
		}

		// Each step as its class says, decided by the plan.
		want := map[string]queue.State{"issue_refund": queue.StateInProgress, "send_customer_email": queue.StateApproved, "invalidate_cache": queue.StateRecorded}
		ids := map[string]string{}
		for _, step := range []map[string]any{refund, mail, cache} {
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(step, pl.ID))
			a := r.Action(t)
			tool := step["tool"].(string)
			if r.Status != http.StatusCreated || a.State != want[tool] || apptest.Deref(a.DecidedBy) != "plan:"+pl.ID {
				t.Fatalf("%s: %d %s", tool, r.Status, r.Body)
			}
			if len(a.Approvals) != 1 || a.Approvals[0].By != "user:ann@example.com" {
				t.Fatalf("%s: approvals %+v, want the plan's", tool, a.Approvals)
			}
			ids[tool] = a.ID
		}
		// The plan-approved email never waited: its channels hear of its
		// approval, never of it pending.
		// The process's own outbox, woken by the submissions, may be fanning
		// the same events out (this FanOut then skips the rows it holds):
		// read until its transaction is in.
		var notes []queue.NotificationRecord
		for deadline := time.Now().Add(5 * time.Second); ; {
			if _, err := e.Outbox.FanOut(context.Background(), 100); err != nil {
				t.Fatal(err)
			}
			var err error
			if notes, err = e.Store.NotificationList(context.Background(), ids["send_customer_email"]); err != nil {
				t.Fatal(err)
			}
			if len(notes) > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		var types []string
		for _, n := range notes {
			types = append(types, n.Type)
		}
		if strings.Join(types, ",") != "action.approved" {
			t.Fatalf("notifications of the plan-approved email: %v, want only action.approved", types)
		}
		// A replay answers the stored action; another copy uses nothing.
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(mail, pl.ID))
		if r.Status != http.StatusOK || r.Action(t).ID != ids["send_customer_email"] || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay of a step: %d %s", r.Status, r.Body)
		}

		// Performed: the plan is done when every step's action is finished.
		e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+ids["issue_refund"]+"/complete", map[string]any{"result": map[string]any{"refund": "r-1"}})
		e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+ids["send_customer_email"]+"/execute", nil)
		r = e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans/"+pl.ID, nil)
		got := planOf(t, r)
		if got.State != queue.PlanApproved || got.Steps[0].ActionState != queue.StateDone || got.Steps[1].ActionState != queue.StateInProgress || got.Steps[1].ActionID != ids["send_customer_email"] {
			t.Fatalf("plan while the email is in progress: %s", r.Body)
		}
		e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+ids["send_customer_email"]+"/complete", map[string]any{"result": map[string]any{"sent": true}})
		if got := planOf(t, e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans/"+pl.ID, nil)); got.State != queue.PlanDone {
			t.Fatalf("plan after every step finished: %s", got.State)
		}
		r = e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans?state=done", nil)
		if !strings.Contains(string(r.Body), pl.ID) {
			t.Fatalf("done plans: %s", r.Body)
		}
	})
}

// TestPlanRefusalsOverHTTP: a rule-rejected step, an ordered plan, a
// cancel, expiry, a step with a warning, and malformed plans.
func TestPlanRefusalsOverHTTP(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		propose := func(body map[string]any) queue.Plan {
			t.Helper()
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", body)
			if r.Status != http.StatusCreated {
				t.Fatalf("propose: %d %s", r.Status, r.Body)
			}
			return planOf(t, r)
		}
		// A step a rule rejects rejects the plan, naming it.
		pl := propose(map[string]any{"title": "legal", "steps": []any{apptest.RefundBody("o-2", 5), mailStep("c-2", "legal", "c@customer.org")}})
		if pl.State != queue.PlanRejected || pl.Steps[1].Decision != queue.StepReject || !strings.Contains(apptest.Deref(pl.DecisionNote).(string), "step 2") {
			t.Fatalf("rule-rejected plan: %+v", pl)
		}
		// Steps that need nobody: approved at once. Ordered: step 2 waits.
		cache := map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"key": "k"}, "intent_key": "cache:o-3"}
		pl = propose(map[string]any{"title": "ordered", "ordered": true, "steps": []any{apptest.RefundBody("o-3", 5), cache}})
		if pl.State != queue.PlanApproved {
			t.Fatalf("a plan no person needs to see: %s", pl.State)
		}
		r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(cache, pl.ID))
		if r.Status != http.StatusConflict || r.Problem(t).Code != queue.CodeStepNotReady {
			t.Fatalf("step 2 before step 1: %d %s", r.Status, r.Body)
		}
		first := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(apptest.RefundBody("o-3", 5), pl.ID)).Action(t)
		e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+first.ID+"/complete", map[string]any{"result": map[string]any{}})
		if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(cache, pl.ID)); r.Status != http.StatusCreated {
			t.Fatalf("step 2 after step 1 is done: %d %s", r.Status, r.Body)
		}
		// Cancel while nothing was submitted; a used plan refuses it.
		if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans/"+pl.ID+"/cancel", nil); r.Status != http.StatusConflict {
			t.Fatalf("cancel of a plan with submitted steps: %d %s", r.Status, r.Body)
		}
		mail := mailStep("c-4", "refund", "c@customer.org")
		pending := propose(map[string]any{"title": "to cancel", "steps": []any{mail}})
		for range 2 {
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans/"+pending.ID+"/cancel", nil)
			if r.Status != http.StatusOK || planOf(t, r).State != queue.PlanCancelled {
				t.Fatalf("cancel: %d %s", r.Status, r.Body)
			}
		}
		// Expiry: an approved plan past its window lets nothing through.
		mail5 := mailStep("c-5", "refund", "c@customer.org")
		late := propose(map[string]any{"title": "late", "steps": []any{mail5}, "expires_after": "1h"})
		if _, err := approvePlan(t, e, late.ID, "bob@example.com"); err != nil {
			t.Fatal(err)
		}
		e.Clock.Advance(time.Hour + time.Second)
		if got := planOf(t, e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans/"+late.ID, nil)); got.State != queue.PlanExpired {
			t.Fatalf("plan past its window: %s", got.State)
		}
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(mail5, late.ID))
		if r.Status != http.StatusConflict || r.Problem(t).Code != queue.CodePlanNotApproved {
			t.Fatalf("step of an expired plan: %d %s", r.Status, r.Body)
		}
		// Listed as expired before the sweep (read at the request) and
		// after it (stored once, with its event).
		listed := func(state string) []string {
			t.Helper()
			r := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans?state="+state, nil)
			var page struct {
				Plans []queue.Plan `json:"plans"`
			}
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &page) != nil {
				t.Fatalf("list %s: %d %s", state, r.Status, r.Body)
			}
			var ids []string
			for _, pl := range page.Plans {
				ids = append(ids, pl.ID)
			}
			return ids
		}
		for _, swept := range []bool{false, true} {
			if swept {
				res, err := e.Sweeper.Sweep(t.Context())
				if err != nil || !slices.Contains(res.PlansExpired, late.ID) {
					t.Fatalf("the sweep expired plans %v (%v), want %s among them", res.PlansExpired, err, late.ID)
				}
			}
			if !slices.Contains(listed("expired"), late.ID) || slices.Contains(listed("approved"), late.ID) {
				t.Fatalf("swept %v: expired %v, approved %v; want the late plan expired only", swept, listed("expired"), listed("approved"))
			}
		}
		if res, err := e.Sweeper.Sweep(t.Context()); err != nil || slices.Contains(res.PlansExpired, late.ID) {
			t.Fatalf("a second sweep expired %v (%v) again", res.PlansExpired, err)
		}
		// What no person saw, no rule approves: a warning makes the step a person's.
		hidden := mailStep("c-6", "t", "a@example.com")
		hidden["payload"].(map[string]any)["body"] = "hi\u200b"
		if pl := propose(map[string]any{"title": "hidden", "steps": []any{hidden}}); pl.State != queue.PlanPending || pl.Steps[0].Decision != queue.StepHuman {
			t.Fatalf("a step with invisible characters: %s %s", pl.State, pl.Steps[0].Decision)
		}
		plain := mailStep("c-6", "t", "a@example.com")
		if pl := propose(map[string]any{"title": "plain", "steps": []any{plain}}); pl.State != queue.PlanApproved || pl.Steps[0].Decision != queue.StepApprove || pl.Steps[0].Rule != "internal-recipient" {
			t.Fatalf("a step a rule approves: %+v", pl)
		}
		// A rule that cannot be evaluated (no currency) makes the step a
		// person's, and even under the approved plan its action waits for
		// a person: no plan approves what carries a warning.
		bare := map[string]any{"tool": "issue_refund", "payload": map[string]any{"order_id": "o-7", "line_id": 1, "amount": 5}}
		failed := propose(map[string]any{"title": "bare", "steps": []any{bare}})
		if failed.State != queue.PlanPending || failed.Steps[0].Decision != queue.StepHuman || failed.Steps[0].Rule != "no-crypto" {
			t.Fatalf("a step whose rule failed: %+v", failed.Steps[0])
		}
		if _, err := approvePlan(t, e, failed.ID, "ann@example.com"); err != nil {
			t.Fatal(err)
		}
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(bare, failed.ID))
		if a := r.Action(t); r.Status != http.StatusCreated || a.State != queue.StatePending || a.DecidedBy != nil {
			t.Fatalf("a step with policy_error under an approved plan: %d %s", r.Status, r.Body)
		}
		// Malformed plans are 400 naming what is wrong.
		for _, tc := range []struct {
			body map[string]any
			want string
		}{
			{map[string]any{"title": "x", "steps": []any{}}, "1 to 50"},
			{map[string]any{"title": "x", "steps": []any{mail, mail}}, "steps[2]"},
			{map[string]any{"title": "x", "steps": []any{mail}, "expires_after": "169h"}, "expires_after"},
			{map[string]any{"title": "x", "steps": []any{map[string]any{"tool": "send_customer_email", "payload": 3}}}, "steps[1]"},
			// A NUL character is named by the step's number too, not by
			// its index from 0 (which reads as the step before).
			{map[string]any{"title": "x", "steps": []any{mail, map[string]any{"tool": "send\x00email", "payload": map[string]any{}}}}, "steps[2]: tool contains a NUL"},
			{map[string]any{"title": "x", "steps": []any{map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"a": []any{"\x00"}}}}}, "steps[1]: payload.a[0] contains a NUL"},
		} {
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", tc.body)
			if r.Status != http.StatusBadRequest || !strings.Contains(r.Problem(t).Detail, tc.want) {
				t.Fatalf("%v: %d %s, want 400 naming %s", tc.body, r.Status, r.Body, tc.want)
			}
		}
		for _, path := range []string{"/api/v1/plans?state=bogus", "/api/v1/plans/" + pl.ID + "?state=bogus&wait=1s", "/api/v1/plans?dry_run=true"} {
			if r := e.Do(e.URL, e.AgentToken, "GET", path, nil); r.Status != http.StatusBadRequest {
				t.Fatalf("%s: %d %s, want 400", path, r.Status, r.Body)
			}
		}
		r = e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans/"+queue.NewID(time.Now()), nil)
		if r.Status != http.StatusNotFound {
			t.Fatalf("unknown plan: %d", r.Status)
		}
	})
}

// TestPlanStepConcurrently: twenty submissions of one step, through two
// processes on PostgreSQL, create one action; the others replay it.
func TestPlanStepConcurrently(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		urls := []string{e.URL}
		if e.DatabaseURL != "" {
			urls = append(urls, e.AddServerURL())
		}
		mail := mailStep("c-9", "refund", "c@customer.org")
		pl := planOf(t, e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", map[string]any{"title": "race", "steps": []any{mail}}))
		if _, err := approvePlan(t, e, pl.ID, "ann@example.com"); err != nil {
			t.Fatal(err)
		}
		statuses := apptest.RunConcurrently(20, func(i int) int {
			r, err := e.Try(urls[i%len(urls)], e.AgentToken, "POST", "/api/v1/actions", stepBody(mail, pl.ID))
			if err != nil {
				t.Error(err)
				return 0
			}
			return r.Status
		})
		created := 0
		for _, s := range statuses {
			switch s {
			case http.StatusCreated:
				created++
			case http.StatusOK:
			default:
				t.Fatalf("statuses %v: want one 201 and 200s", statuses)
			}
		}
		if created != 1 {
			t.Fatalf("statuses %v: %d created, want 1", statuses, created)
		}
		list, err := e.Store.ActionList(context.Background(), queue.ActionListParams{IntentKey: "email:c-9:refund", Limit: 50})
		if err != nil || len(list) != 1 {
			t.Fatalf("%d actions of the step, %v", len(list), err)
		}
	})
}

// TestPlanQuorum: a plan needs the largest required of its human steps;
// concurrent approvals by several people record each once and approve it
// exactly when the quorum is reached.
func TestPlanQuorum(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		vip := mailStep("vip-1", "refund", "v@customer.org")
		pl := planOf(t, e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", map[string]any{"title": "vip", "steps": []any{vip, apptest.RefundBody("o-1", 10)}}))
		if pl.State != queue.PlanPending || pl.ApprovalsRequired != 2 || pl.Steps[0].Rule != "vip-two-people" {
			t.Fatalf("plan %+v", pl)
		}
		res, err := approvePlan(t, e, pl.ID, "ann@example.com")
		if err != nil || res.Outcome != queue.DecideCounted || res.Plan.State != queue.PlanPending {
			t.Fatalf("first approval: %+v %v", res, err)
		}
		if res, err := approvePlan(t, e, pl.ID, "ann@example.com"); err != nil || res.Outcome != queue.DecideReplayed {
			t.Fatalf("the same person again: %+v %v", res, err)
		}
		// bob and cy approve at once: both count, the plan is approved once.
		for _, who := range []string{"bob@example.com", "cy@example.com"} {
			apptest.AddStaff(t, e.Store, who, accounts.RoleApprover)
		}
		errs := apptest.RunConcurrently(2, func(i int) error {
			_, err := e.Service.Plans().Decide(context.Background(), queue.PlanDecideRequest{ID: pl.ID, To: queue.PlanApproved,
				By: "user:" + []string{"bob@example.com", "cy@example.com"}[i]})
			return err
		})
		got, err := e.Service.Plans().Get(context.Background(), pl.ID)
		if err != nil || got.State != queue.PlanApproved || len(got.Approvals) != 2 || got.Approvals[0].By != "user:ann@example.com" {
			t.Fatalf("after concurrent approvals (%v): %+v %v", errs, got, err)
		}
		if n := queue.ErrorCode(errs[0]) + queue.ErrorCode(errs[1]); errs[0] != nil && errs[1] != nil || n != "" && n != queue.CodeAlreadyDecided {
			t.Fatalf("concurrent approvals answered %v", errs)
		}
		evs, _ := e.Store.EventList(context.Background(), queue.EventListParams{Kind: queue.EventPlanApproved, Limit: 10})
		if len(evs) != 1 {
			t.Fatalf("%d plan_approved events, want 1", len(evs))
		}
	})
}

// TestPlanStepWithWarningNeedsNobody: an exactly-once or at-least-once
// step with invisible characters and no rule counts as human, so a person
// approves the plan; performed under it, the step goes on as its class
// says (claimed, recorded), decided by the plan, as every step does.
func TestPlanStepWithWarningNeedsNobody(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		refund := apptest.RefundBody("o-w", 5)
		refund["payload"].(map[string]any)["reason"] = "late\u200b"
		cache := map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"key": "order:o-w\u200b"}, "intent_key": "cache:o-w"}
		pl := planOf(t, e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", map[string]any{"title": "hidden", "steps": []any{refund, cache}}))
		if pl.State != queue.PlanPending || pl.Steps[0].Decision != queue.StepHuman || pl.Steps[1].Decision != queue.StepHuman {
			t.Fatalf("steps with invisible characters: %+v", pl)
		}
		if _, err := approvePlan(t, e, pl.ID, "ann@example.com"); err != nil {
			t.Fatal(err)
		}
		want := map[string]queue.State{"issue_refund": queue.StateInProgress, "invalidate_cache": queue.StateRecorded}
		for _, step := range []map[string]any{refund, cache} {
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(step, pl.ID))
			tool := step["tool"].(string)
			if r.Status != http.StatusCreated {
				t.Fatalf("%s: %d %s, want 201", tool, r.Status, r.Body)
			}
			if a := r.Action(t); a.State != want[tool] || apptest.Deref(a.DecidedBy) != "plan:"+pl.ID {
				t.Fatalf("%s: %s", tool, r.Body)
			}
		}
	})
}

// TestPlanKeylessSteps: an at-least-once step's intent key is optional, so
// a plan may have several steps without one; each is used once.
func TestPlanKeylessSteps(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		a := map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"key": "order:o-k"}}
		b := map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"key": "customer:c-k"}}
		r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", map[string]any{"title": "keyless", "steps": []any{a, b}})
		if r.Status != http.StatusCreated {
			t.Fatalf("propose two key-less steps: %d %s, want 201", r.Status, r.Body)
		}
		pl := planOf(t, r)
		if pl.State != queue.PlanApproved || len(pl.Steps) != 2 || pl.Steps[0].IntentKey != "" || pl.Steps[1].IntentKey != "" {
			t.Fatalf("plan %+v", pl)
		}
		for _, step := range []map[string]any{b, a} {
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(step, pl.ID))
			if r.Status != http.StatusCreated || r.Action(t).State != queue.StateRecorded {
				t.Fatalf("%v: %d %s, want 201", step["payload"], r.Status, r.Body)
			}
		}
		got := planOf(t, e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans/"+pl.ID, nil))
		if got.State != queue.PlanDone || got.Steps[0].ActionID == "" || got.Steps[1].ActionID == "" {
			t.Fatalf("plan after both steps: %+v", got)
		}
		// Two steps with one key are still refused.
		keyed := map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"key": "x"}, "intent_key": "cache:x"}
		if r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", map[string]any{"title": "dup", "steps": []any{keyed, keyed}}); r.Status != http.StatusBadRequest {
			t.Fatalf("two steps with one key: %d %s, want 400", r.Status, r.Body)
		}
	})
}

// TestPlanIdenticalSteps: two equal at-least-once steps without an intent
// key are two steps: the second submission uses the unused one.
func TestPlanIdenticalSteps(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		cache := map[string]any{"tool": "invalidate_cache", "payload": map[string]any{"key": "order:o-i"}}
		pl := planOf(t, e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", map[string]any{"title": "twice", "steps": []any{cache, cache}}))
		if pl.State != queue.PlanApproved || len(pl.Steps) != 2 {
			t.Fatalf("plan %+v", pl)
		}
		for i := range 2 {
			r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(cache, pl.ID))
			if r.Status != http.StatusCreated || r.Action(t).State != queue.StateRecorded {
				t.Fatalf("submission %d: %d %s, want 201", i+1, r.Status, r.Body)
			}
		}
		r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", stepBody(cache, pl.ID))
		if r.Status != http.StatusUnprocessableEntity || r.Problem(t).Code != queue.CodeNotInPlan {
			t.Fatalf("a third submission: %d %s, want 422 not_in_plan", r.Status, r.Body)
		}
		got := planOf(t, e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans/"+pl.ID, nil))
		if got.State != queue.PlanDone || got.Steps[0].ActionID == "" || got.Steps[1].ActionID == "" {
			t.Fatalf("plan after both steps: %+v", got)
		}
	})
}

// TestPlanStepDryRun: a dry run of a submission naming a plan has the
// checks and errors of that submission: refused while the plan is not
// approved or when it matches no step, and once approved it says what the
// plan would make of the step; nothing is stored.
func TestPlanStepDryRun(t *testing.T) {
	t.Parallel()
	policyAPI(t, func(t *testing.T, e *apptest.API) {
		mail := mailStep("c-d", "refund", "c@customer.org")
		pl := planOf(t, e.Do(e.URL, e.AgentToken, "POST", "/api/v1/plans", map[string]any{"title": "dry", "steps": []any{mail}}))
		r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions?dry_run=true", stepBody(mail, pl.ID))
		if r.Status != http.StatusConflict || r.Problem(t).Code != queue.CodePlanNotApproved {
			t.Fatalf("dry run of a step of a pending plan: %d %s, want 409 as its submission", r.Status, r.Body)
		}
		if _, err := approvePlan(t, e, pl.ID, "ann@example.com"); err != nil {
			t.Fatal(err)
		}
		other := mailStep("c-d", "refund", "someone@customer.org")
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions?dry_run=true", stepBody(other, pl.ID))
		if r.Status != http.StatusUnprocessableEntity || r.Problem(t).Code != queue.CodeNotInPlan {
			t.Fatalf("dry run of a call the plan does not hold: %d %s, want 422 not_in_plan", r.Status, r.Body)
		}
		r = e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions?dry_run=true", stepBody(mail, pl.ID))
		var dry dryAnswer
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &dry) != nil || dry.Outcome != queue.DryRunApprove || apptest.Deref(dry.Action.DecidedBy) != "plan:"+pl.ID {
			t.Fatalf("dry run of a step of the approved plan: %d %s, want approve by the plan", r.Status, r.Body)
		}
		if got := planOf(t, e.Do(e.URL, e.AgentToken, "GET", "/api/v1/plans/"+pl.ID, nil)); got.Steps[0].ActionID != "" {
			t.Fatalf("a dry run used the step: %+v", got.Steps[0])
		}
	})
}
