package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// Plans: a plan and its steps as stored, its conditional updates, and the
// use of a step by a submission (queue.PlanStepClaim): once, also under
// concurrent submissions, only while the plan is approved and unexpired,
// and in order for an ordered plan.

// newPlan stores a plan of n steps of tool (class) in state at now,
// expiring an hour later; step i has intent key KEY:i.
func newPlan(t *testing.T, s Store, state queue.PlanState, ordered bool, class classify.Class, key string, n int, now time.Time) *queue.Plan {
	t.Helper()
	pl := &queue.Plan{ID: queue.NewID(now), Title: "refund and tell", Agent: agent, Ordered: ordered, State: state,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), ApprovalsRequired: 2, Approvals: []queue.Approval{}}
	for i := 1; i <= n; i++ {
		pl.Steps = append(pl.Steps, &queue.PlanStep{N: i, Tool: "send_customer_email", Class: class,
			IntentKey: fmt.Sprintf("%s:%d", key, i), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Decision: queue.StepHuman, Rule: "big", Warnings: []string{},
			Approval: &classify.Approval{Required: 2, Approvers: []string{"leads"}, ApproverEmails: []string{"ann@example.com"}}})
	}
	ev := queue.Event{Subject: queue.PlanActorPrefix + pl.ID, Kind: queue.EventPlanSubmitted, Actor: agent, Channel: "api", At: now}
	if err := s.PlanInsert(t.Context(), queue.PlanInsertParams{Plan: pl, Event: ev}); err != nil {
		t.Fatalf("PlanInsert: %v", err)
	}
	return pl
}

// stepAction is the action a step's submission stores: decided by the plan.
func stepAction(pl *queue.Plan, n int, class classify.Class, now time.Time) *queue.Action {
	st := pl.Steps[n-1]
	a := newAction(class, st.Tool, st.IntentKey, now)
	a.Payload = st.Payload
	by := queue.PlanActorPrefix + pl.ID
	a.DecidedBy, a.DecidedAt = &by, &now
	if class == classify.AtMostOnce {
		a.State, a.ApprovedPayload = queue.StateApproved, a.Payload
	}
	return a
}

// submitStep submits step n of pl and returns what the store answered.
func submitStep(t *testing.T, s Store, pl *queue.Plan, n int, class classify.Class, now time.Time) (*queue.Action, queue.ActionSubmitResult) {
	t.Helper()
	a := stepAction(pl, n, class, now)
	res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a),
		PlanStep: &queue.PlanStepClaim{PlanID: pl.ID, N: n, Now: now}})
	if err != nil {
		t.Fatalf("submit step %d: %v", n, err)
	}
	return a, res
}

func getPlan(t *testing.T, s Store, id string) *queue.Plan {
	t.Helper()
	pl, err := s.PlanGetByID(t.Context(), id)
	if err != nil {
		t.Fatalf("PlanGetByID: %v", err)
	}
	return pl
}

var planTests = []test{
	{"InsertAndRead", func(t *testing.T, s Store) {
		pl := newPlan(t, s, queue.PlanPending, true, classify.AtMostOnce, "p", 3, at(0))
		got := getPlan(t, s, pl.ID)
		if got.Title != pl.Title || got.Agent != agent || !got.Ordered || got.State != queue.PlanPending ||
			!got.ExpiresAt.Equal(pl.ExpiresAt) || got.ApprovalsRequired != 2 || len(got.Steps) != 3 {
			t.Fatalf("read back %+v", got)
		}
		st := got.Steps[1]
		if st.N != 2 || st.IntentKey != "p:2" || !queue.JSONEqual(st.Payload, []byte(`{"n":2}`)) || st.Decision != queue.StepHuman ||
			st.Rule != "big" || st.ActionID != "" || st.Approval == nil || st.Approval.Required != 2 || len(st.Approval.ApproverEmails) != 1 {
			t.Fatalf("step 2 read back %+v (approval %+v)", st, st.Approval)
		}
		if _, err := s.PlanGetByID(t.Context(), queue.NewID(at(0))); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("unknown plan: %v, want not found", err)
		}
		list, err := s.PlanList(t.Context(), queue.PlanListParams{State: queue.PlanApproved, Now: at(0), Limit: 10})
		if err != nil || len(list) != 0 {
			t.Fatalf("approved plans: %d, %v; want none", len(list), err)
		}
		list, err = s.PlanList(t.Context(), queue.PlanListParams{Limit: 10})
		if err != nil || len(list) != 1 || len(list[0].Steps) != 3 {
			t.Fatalf("all plans: %d, %v; want 1 with its steps", len(list), err)
		}
		evs, err := s.EventList(t.Context(), queue.EventListParams{Kind: queue.EventPlanSubmitted, Limit: 10})
		if err != nil || len(evs) != 1 || evs[0].Subject != queue.PlanActorPrefix+pl.ID {
			t.Fatalf("plan events %+v, %v", evs, err)
		}
	}},
	{"UpdateIsConditionalOnVersion", func(t *testing.T, s Store) {
		pl := newPlan(t, s, queue.PlanPending, false, classify.AtMostOnce, "u", 1, at(0))
		got := getPlan(t, s, pl.ID)
		// Twenty deciders judged the same version: exactly one update wins.
		var won atomic.Int32
		race(20, func(i int) {
			next := *got
			by := fmt.Sprintf("user:u%d@example.com", i)
			next.State, next.DecidedBy, next.DecidedAt = queue.PlanApproved, &by, ptr(at(time.Minute))
			_, err := s.PlanUpdate(t.Context(), queue.PlanUpdateParams{Plan: &next, Version: got.Version,
				Event: queue.Event{Subject: queue.PlanActorPrefix + pl.ID, Kind: queue.EventPlanApproved, Actor: by, At: at(time.Minute)}})
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, queue.ErrStateMismatch):
				t.Errorf("update %d: %v", i, err)
			}
		})
		if won.Load() != 1 {
			t.Fatalf("%d updates of one version won, want 1", won.Load())
		}
		evs, _ := s.EventList(t.Context(), queue.EventListParams{Kind: queue.EventPlanApproved, Limit: 50})
		if len(evs) != 1 {
			t.Fatalf("%d plan_approved events, want 1", len(evs))
		}
	}},
	{"StepUsedOnceConcurrently", func(t *testing.T, s Store) {
		for _, class := range []classify.Class{classify.AtMostOnce, classify.ExactlyOnce} {
			pl := newPlan(t, s, queue.PlanApproved, false, class, "c-"+string(class), 2, at(0))
			var created, refused atomic.Int32
			race(20, func(i int) {
				a := stepAction(pl, 1, class, at(time.Minute))
				res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a),
					PlanStep: &queue.PlanStepClaim{PlanID: pl.ID, N: 1, Now: at(time.Minute)}})
				switch {
				case err != nil:
					t.Errorf("submit %d: %v", i, err)
				case res.Created:
					created.Add(1)
				case res.PlanStepRefused:
					refused.Add(1)
				case res.Holder == nil:
					t.Errorf("submit %d: neither created, refused nor a holder", i)
				}
			})
			if created.Load() != 1 {
				t.Fatalf("%s: %d submissions of one step created an action, want 1", class, created.Load())
			}
			got := getPlan(t, s, pl.ID)
			if got.Steps[0].ActionID == "" || got.Steps[1].ActionID != "" {
				t.Fatalf("%s: steps after the race: %+v %+v", class, got.Steps[0], got.Steps[1])
			}
			list, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: pl.Steps[0].IntentKey, Limit: 50})
			if err != nil || len(list) != 1 || list[0].ID != got.Steps[0].ActionID {
				t.Fatalf("%s: actions of the step: %d, %v", class, len(list), err)
			}
		}
	}},
	{"StepOnlyWhileApprovedAndUnexpired", func(t *testing.T, s Store) {
		pending := newPlan(t, s, queue.PlanPending, false, classify.AtMostOnce, "pe", 1, at(0))
		if _, res := submitStep(t, s, pending, 1, classify.AtMostOnce, at(time.Minute)); !res.PlanStepRefused || res.Created {
			t.Fatalf("a pending plan let a step through: %+v", res)
		}
		approved := newPlan(t, s, queue.PlanApproved, false, classify.AtMostOnce, "ex", 1, at(0))
		if _, res := submitStep(t, s, approved, 1, classify.AtMostOnce, at(time.Hour)); !res.PlanStepRefused {
			t.Fatalf("an expired plan let a step through: %+v", res)
		}
		for _, key := range []string{"pe:1", "ex:1"} {
			if list, _ := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: key, Limit: 5}); len(list) != 0 {
				t.Fatalf("a refused step stored %d actions of %s", len(list), key)
			}
		}
		if _, res := submitStep(t, s, approved, 1, classify.AtMostOnce, at(59*time.Minute)); !res.Created {
			t.Fatalf("an approved plan refused its step: %+v", res)
		}
	}},
	{"OrderedStepsWaitForEarlierOnes", func(t *testing.T, s Store) {
		pl := newPlan(t, s, queue.PlanApproved, true, classify.ExactlyOnce, "o", 2, at(0))
		if _, res := submitStep(t, s, pl, 2, classify.ExactlyOnce, at(time.Minute)); !res.PlanStepRefused {
			t.Fatalf("step 2 went before step 1: %+v", res)
		}
		a1, res := submitStep(t, s, pl, 1, classify.ExactlyOnce, at(time.Minute))
		if !res.Created {
			t.Fatalf("step 1: %+v", res)
		}
		if _, res := submitStep(t, s, pl, 2, classify.ExactlyOnce, at(2*time.Minute)); !res.PlanStepRefused {
			t.Fatalf("step 2 went while step 1 is in progress: %+v", res)
		}
		transition(t, s, queue.ActionTransitionParams{ID: a1.ID, From: []queue.State{queue.StateInProgress}, To: queue.StateDone,
			Now: at(3 * time.Minute), Result: json.RawMessage(`{}`), FinishedAt: ptr(at(3 * time.Minute)),
			Event: queue.Event{Kind: queue.EventCompleted, Actor: agent, At: at(3 * time.Minute)}})
		if _, res := submitStep(t, s, pl, 2, classify.ExactlyOnce, at(4*time.Minute)); !res.Created {
			t.Fatalf("step 2 after step 1 is done: %+v", res)
		}
		got := getPlan(t, s, pl.ID)
		if got.Steps[0].ActionState != queue.StateDone || got.Steps[1].ActionState != queue.StateInProgress {
			t.Fatalf("step states %s, %s", got.Steps[0].ActionState, got.Steps[1].ActionState)
		}
	}},
	{"HeldIntentUsesNoStep", func(t *testing.T, s Store) {
		pl := newPlan(t, s, queue.PlanApproved, false, classify.AtMostOnce, "h", 1, at(0))
		held := newAction(classify.AtMostOnce, "send_customer_email", "h:1", at(0))
		if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: held, Event: submittedEvent(held)}); err != nil {
			t.Fatal(err)
		}
		_, res := submitStep(t, s, pl, 1, classify.AtMostOnce, at(time.Minute))
		if res.Created || res.Holder == nil || res.Holder.ID != held.ID {
			t.Fatalf("a held intent: %+v, want its holder", res)
		}
		if got := getPlan(t, s, pl.ID); got.Steps[0].ActionID != "" {
			t.Fatalf("the step was used by %s though nothing was inserted", got.Steps[0].ActionID)
		}
	}},
	{"ExpireDueOnceWithEvent", func(t *testing.T, s Store) {
		// Every plan ends its window at 1h (newPlan). pending and open
		// (an approved plan with a step unsubmitted) expire; done (every
		// step's action finished) and rejected never do; later ends at 3h.
		pending := newPlan(t, s, queue.PlanPending, false, classify.AtMostOnce, "xp", 2, at(0))
		open := newPlan(t, s, queue.PlanApproved, false, classify.ExactlyOnce, "xo", 2, at(time.Second))
		done := newPlan(t, s, queue.PlanApproved, false, classify.ExactlyOnce, "xd", 1, at(2*time.Second))
		rejected := newPlan(t, s, queue.PlanRejected, false, classify.AtMostOnce, "xr", 1, at(3*time.Second))
		later := newPlan(t, s, queue.PlanPending, false, classify.AtMostOnce, "xl", 1, at(2*time.Hour))
		if _, res := submitStep(t, s, open, 1, classify.ExactlyOnce, at(time.Minute)); !res.Created {
			t.Fatalf("open step 1: %+v", res)
		}
		d1, res := submitStep(t, s, done, 1, classify.ExactlyOnce, at(time.Minute))
		if !res.Created {
			t.Fatalf("done step 1: %+v", res)
		}
		transition(t, s, queue.ActionTransitionParams{ID: d1.ID, From: []queue.State{queue.StateInProgress}, To: queue.StateDone,
			Now: at(2 * time.Minute), Result: json.RawMessage(`{}`), FinishedAt: ptr(at(2 * time.Minute)),
			Event: queue.Event{Kind: queue.EventCompleted, Actor: agent, At: at(2 * time.Minute)}})
		judged := getPlan(t, s, pending.ID)

		list := func(state queue.PlanState, now time.Time) []string {
			t.Helper()
			got, err := s.PlanList(t.Context(), queue.PlanListParams{State: state, Now: now, Limit: 50})
			noErr(t, err, "list "+string(state))
			ids := make([]string, len(got))
			for i, pl := range got {
				ids[i] = pl.ID
			}
			return ids
		}
		want := func(what string, got []string, want ...*queue.Plan) {
			t.Helper()
			ids := make([]string, len(want))
			for i, pl := range want {
				ids[i] = pl.ID
			}
			if !slices.Equal(got, ids) {
				t.Fatalf("%s: %v, want %v (newest first)", what, got, ids)
			}
		}
		// Before the window ends, and after it before any sweep: the
		// lists read the state as Plan.Settle does.
		want("pending at 30m", list(queue.PlanPending, at(30*time.Minute)), later, pending)
		want("approved at 30m", list(queue.PlanApproved, at(30*time.Minute)), open)
		want("done at 30m", list(queue.PlanDone, at(30*time.Minute)), done)
		want("expired at 30m", list(queue.PlanExpired, at(30*time.Minute)))
		want("expired at 90m, unswept", list(queue.PlanExpired, at(90*time.Minute)), open, pending)
		want("pending at 3h, unswept", list(queue.PlanPending, at(3*time.Hour)))

		// Sweepers racing at 90m: each due plan is expired once, with one
		// event.
		var mu sync.Mutex
		var swept []string
		race(8, func(i int) {
			ids, err := s.PlanExpireDue(t.Context(), queue.PlanExpiryDue(at(90*time.Minute), 10))
			if err != nil {
				t.Errorf("sweeper %d: %v", i, err)
			}
			mu.Lock()
			swept = append(swept, ids...)
			mu.Unlock()
		})
		slices.Sort(swept)
		wantSwept := []string{pending.ID, open.ID}
		slices.Sort(wantSwept)
		if !slices.Equal(swept, wantSwept) {
			t.Fatalf("the sweepers expired %v, want %v once each", swept, wantSwept)
		}
		evs, err := s.EventList(t.Context(), queue.EventListParams{Kind: queue.EventPlanExpired, Limit: 50})
		noErr(t, err, "list plan_expired events")
		subjects := map[string]int{}
		for _, ev := range evs {
			subjects[ev.Subject]++
			if ev.Actor != "system" || !ev.At.Equal(at(90*time.Minute)) || ev.ActionID != "" {
				t.Fatalf("plan_expired event %+v", ev)
			}
			eventAsGiven(t, ev, queue.PlanExpiryDue(at(90*time.Minute), 10).Event, "", "", "plan_expired event")
		}
		if len(evs) != 2 || subjects[queue.PlanActorPrefix+pending.ID] != 1 || subjects[queue.PlanActorPrefix+open.ID] != 1 {
			t.Fatalf("plan_expired events by subject %v, want one for each expired plan", subjects)
		}
		if again, err := s.PlanExpireDue(t.Context(), queue.PlanExpiryDue(at(100*time.Minute), 10)); err != nil || len(again) != 0 {
			t.Fatalf("a second sweep expired %v (%v), want nothing", again, err)
		}

		// Stored: the plans read expired, a pending one decided by the
		// system, an approved one keeping its decision; the rest unchanged.
		got := getPlan(t, s, pending.ID)
		if got.State != queue.PlanExpired || got.DecidedBy == nil || *got.DecidedBy != "system" || !got.DecidedAt.Equal(at(90*time.Minute)) {
			t.Fatalf("expired pending plan %+v", got)
		}
		if got := getPlan(t, s, open.ID); got.State != queue.PlanExpired || got.Steps[0].ActionState != queue.StateInProgress {
			t.Fatalf("expired approved plan: %s, step 1 %s; its submitted step goes on", got.State, got.Steps[0].ActionState)
		}
		for _, pl := range []*queue.Plan{done, rejected, later} {
			if got := getPlan(t, s, pl.ID); got.State != pl.State {
				t.Fatalf("plan %s is %s after the sweep, want %s", pl.Title, got.State, pl.State)
			}
		}
		want("expired at 90m, swept", list(queue.PlanExpired, at(90*time.Minute)), open, pending)
		want("expired at 30m, swept", list(queue.PlanExpired, at(30*time.Minute)), open, pending)
		want("approved at 30m, swept", list(queue.PlanApproved, at(30*time.Minute)))
		want("done, swept", list(queue.PlanDone, at(90*time.Minute)), done)
		want("rejected", list(queue.PlanRejected, at(90*time.Minute)), rejected)
		want("all", list("", at(90*time.Minute)), later, rejected, done, open, pending)
		page, err := s.PlanList(t.Context(), queue.PlanListParams{Now: at(90 * time.Minute), Limit: 2,
			After: &queue.Cursor{CreatedAt: rejected.CreatedAt, ID: rejected.ID}})
		noErr(t, err, "list after a cursor")
		if len(page) != 2 || page[0].ID != done.ID || page[1].ID != open.ID {
			t.Fatalf("the page after %s: %d plans", rejected.ID, len(page))
		}

		// A decision judged before the expiry finds another version; a
		// step of the expired plan is refused.
		next := *judged
		by := "user:ann@example.com"
		next.State, next.DecidedBy = queue.PlanApproved, &by
		if _, err := s.PlanUpdate(t.Context(), queue.PlanUpdateParams{Plan: &next, Version: judged.Version,
			Event: queue.Event{Subject: queue.PlanActorPrefix + pending.ID, Kind: queue.EventPlanApproved, Actor: by, At: at(91 * time.Minute)}}); !errors.Is(err, queue.ErrStateMismatch) {
			t.Fatalf("approving a plan the sweep expired: %v, want a state mismatch", err)
		}
		if _, res := submitStep(t, s, open, 2, classify.ExactlyOnce, at(30*time.Minute)); !res.PlanStepRefused {
			t.Fatalf("a step of an expired plan: %+v, want refused", res)
		}
		// The expiries are in the sealed chain like every event.
		sealAll(t, s, "sweep")
		checkChain(t, s)
	}},
	{"CancelOnlyWhileUnused", func(t *testing.T, s Store) {
		pl := newPlan(t, s, queue.PlanApproved, false, classify.AtMostOnce, "x", 2, at(0))
		got := getPlan(t, s, pl.ID)
		if _, res := submitStep(t, s, pl, 1, classify.AtMostOnce, at(time.Minute)); !res.Created {
			t.Fatalf("step 1: %+v", res)
		}
		next := *got
		next.State = queue.PlanCancelled
		// Judged before the step was used: both the version and the
		// unused condition refuse it.
		_, err := s.PlanUpdate(t.Context(), queue.PlanUpdateParams{Plan: &next, Version: got.Version, Unused: true,
			Event: queue.Event{Subject: queue.PlanActorPrefix + pl.ID, Kind: queue.EventPlanCancelled, Actor: agent, At: at(2 * time.Minute)}})
		if !errors.Is(err, queue.ErrStateMismatch) {
			t.Fatalf("cancel after a step was used: %v, want a state mismatch", err)
		}
		now := getPlan(t, s, pl.ID)
		_, err = s.PlanUpdate(t.Context(), queue.PlanUpdateParams{Plan: &next, Version: now.Version, Unused: true,
			Event: queue.Event{Subject: queue.PlanActorPrefix + pl.ID, Kind: queue.EventPlanCancelled, Actor: agent, At: at(2 * time.Minute)}})
		if !errors.Is(err, queue.ErrStateMismatch) {
			t.Fatalf("cancel of a plan with a used step: %v, want a state mismatch", err)
		}
	}},
}
