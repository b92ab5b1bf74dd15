package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// Policies and grants: what a store does with a submission a policy rule
// decided, with a grant an approval creates and a submission uses, and
// with the dry run's reads, which must write nothing.

// policyDecided returns a new action of class that the rule name decided
// (approve or reject) at now, with the decision's event, as the Service
// builds them.
func policyDecided(class classify.Class, key, rule string, decision classify.Decision, now time.Time) (*queue.Action, *queue.Event) {
	a := newAction(class, "send_customer_email", key, now)
	a.ClaimedAt, a.ClaimedBy, a.ExpiresAt = nil, nil, nil
	by := queue.PolicyActorPrefix + rule
	a.Spec.Approval = &classify.Approval{Required: 1, Rule: rule, Decision: decision}
	a.DecidedBy, a.DecidedAt = &by, &now
	ev := &queue.Event{Actor: by, Channel: queue.PolicyChannel, At: now, Data: json.RawMessage(`{"rule":"` + rule + `"}`)}
	switch decision {
	case classify.DecideApprove:
		note := rule + ": payload.amount < 100"
		a.State, a.DecisionNote, a.ApprovedPayload = queue.StateApproved, &note, a.Payload
		a.ExpiresAt = ptr(now.Add(72 * time.Hour))
		a.Approvals = []queue.Approval{{By: by, At: now, Note: note}}
		ev.Kind = queue.EventApproved
	case classify.DecideReject:
		note := "not by policy"
		a.State, a.DecisionNote, a.FinishedAt = queue.StateRejected, &note, &now
		ev.Kind = queue.EventRejected
	}
	return a, ev
}

// grantAction submits a pending action and approves it with a grant built
// by change from a default (this agent, the customer_id field, 8 hours, no
// limit); it returns the grant as stored.
func grantAction(t *testing.T, s Store, key string, now time.Time, change func(g *queue.Grant)) *queue.Grant {
	t.Helper()
	a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", key, now)
	g := &queue.Grant{ID: queue.NewID(now), Tool: a.Tool, Agent: a.RequestedBy, GrantedBy: "user:ann@example.com",
		ActionID: a.ID, CreatedAt: now, ExpiresAt: now.Add(8 * time.Hour),
		Fields: []queue.GrantField{{Path: "customer_id", Value: json.RawMessage(`"c-1"`)}}}
	if change != nil {
		change(g)
	}
	// A grant approves only while its granting user may decide: they exist,
	// as an approver unless the test made them already.
	if email := g.GranterEmail(); email != "" {
		if _, err := s.UserGetByEmail(t.Context(), email); errors.Is(err, accounts.ErrNotFound) {
			createUser(t, s, email, accounts.RoleApprover, now)
		}
	}
	p := decideParams(a.ID, queue.StateApproved, g.GrantedBy, now)
	p.Grant = g
	p.GrantEvent = queue.Event{ActionID: a.ID, Kind: queue.EventGrantCreated, Actor: g.GrantedBy, Channel: "dashboard", At: now,
		Data: json.RawMessage(`{"grant":"` + g.ID + `"}`)}
	res, err := s.ActionDecide(t.Context(), p)
	noErr(t, err, "approve with a grant")
	eq(t, res.Action.State, queue.StateApproved, "the granting action")
	got, err := s.GrantGetByID(t.Context(), g.ID)
	noErr(t, err, "get grant")
	return got
}

// grantTry submits a pending action of payload by requestedBy at now,
// letting a grant approve it, and returns what was stored.
func grantTry(t *testing.T, s Store, key, requestedBy, payload string, now time.Time) *queue.Action {
	t.Helper()
	a := newAction(classify.AtMostOnce, "send_customer_email", key, now)
	a.RequestedBy, a.Payload = requestedBy, json.RawMessage(payload)
	ev := submittedEvent(a)
	ev.Actor = requestedBy
	res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: ev,
		Grant: &queue.GrantTry{Now: now, ExpiresAt: now.Add(time.Hour)}})
	noErr(t, err, "submit "+key)
	if !res.Created {
		t.Fatalf("submit %s: not created", key)
	}
	return res.Holder
}

// grantedBy fails unless a was approved by grant g at now, as
// docs/policies.md describes it.
func grantedBy(t *testing.T, s Store, a *queue.Action, g *queue.Grant, now time.Time) {
	t.Helper()
	eq(t, a.State, queue.StateApproved, a.IntentKey+": state")
	eq(t, a.GrantID, g.ID, a.IntentKey+": grant_id")
	strPtrEq(t, a.DecidedBy, ptr(queue.GrantActorPrefix+g.ID), a.IntentKey+": decided_by")
	strPtrEq(t, a.DecisionNote, ptr(queue.GrantNote(g.ID, g.GrantedBy)), a.IntentKey+": decision_note")
	timePtrEq(t, a.DecidedAt, &now, a.IntentKey+": decided_at")
	timePtrEq(t, a.ExpiresAt, ptr(now.Add(time.Hour)), a.IntentKey+": expires_at")
	jsonEq(t, a.ApprovedPayload, a.Payload, a.IntentKey+": approved_payload")
	if len(a.Approvals) != 1 || a.Approvals[0].By != g.GrantedBy || !a.Approvals[0].At.Equal(now) || a.Approvals[0].Note != queue.GrantNote(g.ID, g.GrantedBy) {
		t.Fatalf("%s: approvals %+v, want the granting user's", a.IntentKey, a.Approvals)
	}
	stored := get(t, s, a.ID)
	eq(t, stored.GrantID, g.ID, a.IntentKey+": stored grant_id")
	eq(t, stored.State, queue.StateApproved, a.IntentKey+": stored state")
	evs := events(t, s, a.ID)
	if len(evs) != 2 || evs[1].Kind != queue.EventSubmitted || evs[0].Kind != queue.EventApproved {
		t.Fatalf("%s: events %v, want submitted then approved", a.IntentKey, eventKinds(t, s, a.ID))
	}
	eq(t, evs[0].Actor, queue.GrantActorPrefix+g.ID, a.IntentKey+": approved event actor")
	eq(t, evs[0].Channel, queue.GrantChannel, a.IntentKey+": approved event channel")
	jsonEq(t, evs[0].Data, queue.GrantEventData(g.ID, g.GrantedBy), a.IntentKey+": approved event data")
}

var policyTests = []test{
	{"RuleApprovesAtSubmission", func(t *testing.T, s Store) {
		a, dec := policyDecided(classify.AtMostOnce, "policy:1", "small", classify.DecideApprove, at(0))
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a), Decision: dec})
		noErr(t, err, "submit")
		eq(t, res.Created, true, "created")
		got := res.Holder
		eq(t, got.State, queue.StateApproved, "state")
		strPtrEq(t, got.DecidedBy, ptr("policy:small"), "decided_by")
		strPtrEq(t, got.DecisionNote, a.DecisionNote, "decision_note")
		jsonEq(t, got.ApprovedPayload, a.Payload, "approved_payload")
		eq(t, len(got.Approvals), 1, "approvals")
		eq(t, got.Approvals[0].By, "policy:small", "approvals[0].by")
		eq(t, got.Spec.Approval.Rule, "small", "the snapshot names the rule")
		stored := get(t, s, a.ID)
		eq(t, stored.State, queue.StateApproved, "stored state")
		eq(t, stored.WaitsForPerson(), false, "waits for a person")
		evs := events(t, s, a.ID)
		sliceEq(t, eventKinds(t, s, a.ID), []string{queue.EventSubmitted, queue.EventApproved}, "events in order")
		eq(t, evs[0].Channel, queue.PolicyChannel, "decision channel")
		eq(t, evs[0].Actor, "policy:small", "decision actor")
		jsonEq(t, evs[0].Data, dec.Data, "decision data")
		// Executed like any approved action.
		transition(t, s, executeParams(a.ID, at(time.Minute), at(10*time.Minute)))
	}},
	{"RuleRejectsExactlyOnceWithoutClaim", func(t *testing.T, s Store) {
		a, dec := policyDecided(classify.ExactlyOnce, "policy:2", "no-crypto", classify.DecideReject, at(0))
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a), Decision: dec})
		noErr(t, err, "submit")
		got := res.Holder
		eq(t, got.State, queue.StateRejected, "state")
		eq(t, got.ClaimedAt == nil, true, "nothing claimed")
		sliceEq(t, eventKinds(t, s, a.ID), []string{queue.EventSubmitted, queue.EventRejected}, "events")
		// The intent is held as for any rejection.
		again := newAction(classify.ExactlyOnce, "send_customer_email", "policy:2", at(time.Minute))
		res, err = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: again, Event: submittedEvent(again)})
		noErr(t, err, "submit again")
		eq(t, res.Created, false, "created again")
		eq(t, res.Holder.ID, a.ID, "the rejection holds the intent")
	}},
	{"ExactlyOnceWaitsForAPerson", func(t *testing.T, s Store) {
		a := newAction(classify.ExactlyOnce, "issue_refund", "policy:3", at(0))
		a.ClaimedAt, a.ClaimedBy = nil, nil
		a.State, a.ExpiresAt = queue.StatePending, ptr(at(time.Hour))
		a.Spec.Approval = &classify.Approval{Required: 1, Rule: "large-refund", Decision: classify.DecideHuman,
			Approvers: []string{"finance"}, ApproverEmails: []string{"fin@example.com"}}
		dec := &queue.Event{Kind: queue.EventPolicyHuman, Actor: "policy:large-refund", Channel: queue.PolicyChannel, At: at(0)}
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a), Decision: dec})
		noErr(t, err, "submit")
		eq(t, res.Holder.State, queue.StatePending, "state")
		eq(t, res.Holder.WaitsForPerson(), true, "waits for a person")
		_, err = s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:ann@example.com", at(time.Minute)))
		eq(t, queue.ErrorCode(err), queue.CodeForbidden, "someone outside the rule's approvers")
		res2, err := s.ActionDecide(t.Context(), decideParams(a.ID, queue.StateApproved, "user:fin@example.com", at(time.Minute)))
		noErr(t, err, "approve")
		eq(t, res2.Action.State, queue.StateApproved, "approved")
		transition(t, s, executeParams(a.ID, at(2*time.Minute), at(10*time.Minute)))
		done := transition(t, s, completeParams(a.ID, at(3*time.Minute), `{"refund":"re_1"}`))
		eq(t, done.State, queue.StateDone, "done")
		sliceEq(t, eventKinds(t, s, a.ID), []string{queue.EventSubmitted, queue.EventPolicyHuman, queue.EventApproved,
			queue.EventClaimed, queue.EventCompleted}, "events")
	}},
	{"Hits", func(t *testing.T, s Store) {
		for i, when := range []time.Duration{0, -30 * time.Hour, -8 * 24 * time.Hour} {
			a, dec := policyDecided(classify.AtMostOnce, fmt.Sprintf("hits:%d", i), "small", classify.DecideApprove, at(when))
			_, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a), Decision: dec})
			noErr(t, err, "submit")
		}
		a, dec := policyDecided(classify.AtMostOnce, "hits:3", "legal", classify.DecideReject, at(0))
		_, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a), Decision: dec})
		noErr(t, err, "submit")
		hits, err := s.PolicyHits(t.Context(), queue.PolicyHitsParams{Day: at(-24 * time.Hour), Week: at(-7 * 24 * time.Hour)})
		noErr(t, err, "hits")
		want := []queue.PolicyHit{{Tool: "send_customer_email", Rule: "legal", Day: 1, Week: 1},
			{Tool: "send_customer_email", Rule: "small", Day: 1, Week: 2}}
		sliceEq(t, hits, want, "hits by tool and rule")
	}},
}

var grantTests = []test{
	{"ApprovesWhatMatches", func(t *testing.T, s Store) {
		g := grantAction(t, s, "grant:0", at(0), nil)
		eq(t, g.Uses, 0, "the granting action is not a use")
		eq(t, g.MaxUses, 0, "no limit")
		eq(t, len(g.Fields), 1, "fields")
		eq(t, g.Fields[0].Path, "customer_id", "field path")
		// Same customer, same agent: approved by the grant.
		a := grantTry(t, s, "grant:1", agent, `{"customer_id":"c-1","amount":99}`, at(time.Minute))
		grantedBy(t, s, a, g, at(time.Minute))
		// Another customer, or another agent: pending.
		eq(t, grantTry(t, s, "grant:2", agent, `{"customer_id":"c-2"}`, at(time.Minute)).State, queue.StatePending, "other field value")
		eq(t, grantTry(t, s, "grant:3", "agent:other", `{"customer_id":"c-1"}`, at(time.Minute)).State, queue.StatePending, "other agent")
		eq(t, grantTry(t, s, "grant:4", agent, `{"amount":1}`, at(time.Minute)).State, queue.StatePending, "field missing")
		// Without GrantTry (a rule decided, or grants do not apply) nothing is used.
		b := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "grant:5", at(time.Minute))
		eq(t, b.State, queue.StatePending, "no grant try")
		list, err := s.ActionList(t.Context(), queue.ActionListParams{GrantID: g.ID, Limit: 10})
		noErr(t, err, "list by grant")
		sliceEq(t, ids(list), []string{a.ID}, "the actions it approved")
		got, err := s.GrantGetByID(t.Context(), g.ID)
		noErr(t, err, "get grant")
		eq(t, got.Uses, 1, "uses counted")
	}},
	{"AnyAgentAndNoFields", func(t *testing.T, s Store) {
		g := grantAction(t, s, "grant:any:0", at(0), func(g *queue.Grant) { g.Agent, g.Fields = "", nil })
		eq(t, len(g.Fields), 0, "no fields")
		a := grantTry(t, s, "grant:any:1", "agent:other", `{"whatever":true}`, at(time.Minute))
		grantedBy(t, s, a, g, at(time.Minute))
	}},
	{"FieldsCompareAsJSONValues", func(t *testing.T, s Store) {
		g := grantAction(t, s, "grant:json:0", at(0), func(g *queue.Grant) {
			g.Fields = []queue.GrantField{{Path: "amount", Value: json.RawMessage(`12`)},
				{Path: "to.address", Value: json.RawMessage(`{"a":1,"b":[1,2]}`)}}
		})
		for i, tc := range []struct {
			payload string
			match   bool
		}{
			{`{"amount":12.0,"to":{"address":{"b":[1,2.0],"a":1e0}}}`, true},
			{`{"amount":1.2e1,"to":{"address":{"a":1,"b":[1,2]},"name":"x"}}`, true},
			{`{"amount":12,"to":{"address":{"a":1,"b":[2,1]}}}`, false},
			{`{"amount":12,"to":{"address":{"a":1,"b":[1,2],"c":3}}}`, false},
			{`{"amount":"12","to":{"address":{"a":1,"b":[1,2]}}}`, false},
			{`{"amount":12.000000000000000000001,"to":{"address":{"a":1,"b":[1,2]}}}`, false},
			{`{"amount":12,"to":[{"address":{"a":1,"b":[1,2]}}]}`, false},
		} {
			a := grantTry(t, s, fmt.Sprintf("grant:json:%d", i+1), agent, tc.payload, at(time.Minute))
			if got := a.State == queue.StateApproved; got != tc.match {
				t.Fatalf("payload %s: approved %v, want %v", tc.payload, got, tc.match)
			}
			if tc.match {
				eq(t, a.GrantID, g.ID, "grant")
			}
		}
	}},
	{"UseCountExpiryAndRevocation", func(t *testing.T, s Store) {
		g := grantAction(t, s, "grant:n:0", at(0), func(g *queue.Grant) { g.MaxUses = 2 })
		eq(t, grantTry(t, s, "grant:n:1", agent, `{"customer_id":"c-1"}`, at(time.Minute)).GrantID, g.ID, "first use")
		// A replay of a held intent is no use.
		again := newAction(classify.AtMostOnce, "send_customer_email", "grant:n:1", at(2*time.Minute))
		again.Payload = json.RawMessage(`{"customer_id":"c-1"}`)
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: again, Event: submittedEvent(again),
			Grant: &queue.GrantTry{Now: at(2 * time.Minute), ExpiresAt: at(time.Hour)}})
		noErr(t, err, "replay")
		eq(t, res.Created, false, "replay created")
		eq(t, grantTry(t, s, "grant:n:2", agent, `{"customer_id":"c-1"}`, at(3*time.Minute)).GrantID, g.ID, "second use")
		eq(t, grantTry(t, s, "grant:n:3", agent, `{"customer_id":"c-1"}`, at(4*time.Minute)).State, queue.StatePending, "past max_uses")
		got, err := s.GrantGetByID(t.Context(), g.ID)
		noErr(t, err, "get")
		eq(t, got.Uses, 2, "uses")
		if left, ok := got.UsesLeft(); !ok || left != 0 {
			t.Fatalf("uses left %d %v, want 0", left, ok)
		}

		exp := grantAction(t, s, "grant:e:0", at(time.Second), func(g *queue.Grant) { g.ExpiresAt = at(time.Hour) })
		eq(t, grantTry(t, s, "grant:e:1", agent, `{"customer_id":"c-1"}`, at(59*time.Minute)).GrantID, exp.ID, "before expiry")
		eq(t, grantTry(t, s, "grant:e:2", agent, `{"customer_id":"c-1"}`, at(time.Hour)).State, queue.StatePending, "at expiry")

		rev := grantAction(t, s, "grant:r:0", at(2*time.Hour), nil)
		r, err := s.GrantRevoke(t.Context(), queue.GrantRevokeParams{ID: rev.ID, By: "user:ops@example.com", Now: at(2*time.Hour + time.Minute),
			Event: queue.Event{Kind: queue.EventGrantRevoked, Actor: "user:ops@example.com", Channel: "dashboard", At: at(2*time.Hour + time.Minute)}})
		noErr(t, err, "revoke")
		timePtrEq(t, r.RevokedAt, ptr(at(2*time.Hour+time.Minute)), "revoked_at")
		strPtrEq(t, r.RevokedBy, ptr("user:ops@example.com"), "revoked_by")
		eq(t, grantTry(t, s, "grant:r:1", agent, `{"customer_id":"c-1"}`, at(2*time.Hour+2*time.Minute)).State, queue.StatePending, "after revocation")
		_, err = s.GrantRevoke(t.Context(), queue.GrantRevokeParams{ID: rev.ID, By: "user:ann@example.com", Now: at(3 * time.Hour),
			Event: queue.Event{Kind: queue.EventGrantRevoked, Actor: "user:ann@example.com", At: at(3 * time.Hour)}})
		isErr(t, err, queue.ErrStateMismatch, "revoke twice")
		eq(t, countKind(eventKinds(t, s, rev.ActionID), queue.EventGrantRevoked), 1, "one revocation event")
		_, err = s.GrantRevoke(t.Context(), queue.GrantRevokeParams{ID: queue.NewID(t0), By: "user:x", Now: t0})
		eq(t, errorsIsNotFound(err), true, "revoke unknown: not found")
		_, err = s.GrantGetByID(t.Context(), "not-a-uuid")
		eq(t, errorsIsNotFound(err), true, "get malformed: not found")

		active, err := s.GrantList(t.Context(), queue.GrantListParams{Active: ptr(true), Now: at(2*time.Hour + 3*time.Minute)})
		noErr(t, err, "list active")
		eq(t, len(active), 0, "active grants (used up, expired, revoked)")
		past, err := s.GrantList(t.Context(), queue.GrantListParams{Active: ptr(false), Now: at(2*time.Hour + 3*time.Minute)})
		noErr(t, err, "list past")
		sliceEq(t, grantIDs(past), []string{rev.ID, exp.ID, g.ID}, "past grants, newest first")
	}},
	{"PrefersOneWithoutLimit", func(t *testing.T, s Store) {
		limited := grantAction(t, s, "grant:p:0", at(0), func(g *queue.Grant) { g.MaxUses, g.ExpiresAt = 5, at(time.Hour) })
		free := grantAction(t, s, "grant:p:1", at(time.Second), func(g *queue.Grant) { g.ExpiresAt = at(2 * time.Hour) })
		eq(t, grantTry(t, s, "grant:p:2", agent, `{"customer_id":"c-1"}`, at(time.Minute)).GrantID, free.ID, "the grant without a limit")
		got, err := s.GrantGetByID(t.Context(), limited.ID)
		noErr(t, err, "get")
		eq(t, got.Uses, 0, "the limited grant kept its uses")
	}},
	{"ConcurrentUsesNeverExceedTheLimit", func(t *testing.T, s Store) {
		g := grantAction(t, s, "grant:race:0", at(0), func(g *queue.Grant) { g.MaxUses, g.Fields = 3, nil })
		const n = 20
		got, errs := raceGrantTries(t, s, "grant:race", n)
		approved := 0
		for i := range n {
			noErr(t, errs[i], fmt.Sprintf("submitter %d", i))
			switch got[i].State {
			case queue.StateApproved:
				approved++
				eq(t, got[i].GrantID, g.ID, "grant")
			case queue.StatePending:
			default:
				t.Fatalf("submitter %d: state %s", i, got[i].State)
			}
		}
		eq(t, approved, 3, "approved by a grant of 3 uses")
		stored, err := s.GrantGetByID(t.Context(), g.ID)
		noErr(t, err, "get")
		eq(t, stored.Uses, 3, "uses")
	}},
	{"ConcurrentUsesMoveToTheNextGrant", func(t *testing.T, s Store) {
		// The grant that expires first is picked first; once a concurrent
		// submission used it up, the next one is (PostgreSQL rereads it
		// under its row lock and picks again without it).
		first := grantAction(t, s, "grant:next:first", at(0), func(g *queue.Grant) { g.MaxUses, g.Fields, g.ExpiresAt = 2, nil, at(2*time.Hour) })
		second := grantAction(t, s, "grant:next:second", at(time.Second), func(g *queue.Grant) { g.MaxUses, g.Fields, g.ExpiresAt = 2, nil, at(3*time.Hour) })
		const n = 12
		got, errs := raceGrantTries(t, s, "grant:next", n)
		by := map[string]int{}
		for i := range n {
			noErr(t, errs[i], fmt.Sprintf("submitter %d", i))
			switch got[i].State {
			case queue.StateApproved:
				by[got[i].GrantID]++
			case queue.StatePending:
				eq(t, got[i].GrantID, "", fmt.Sprintf("submitter %d: grant of a pending action", i))
			default:
				t.Fatalf("submitter %d: state %s", i, got[i].State)
			}
		}
		eq(t, by[first.ID], 2, "approved by the grant that expires first")
		eq(t, by[second.ID], 2, "approved by the next one")
		eq(t, len(by), 2, "grants used")
		for _, g := range []*queue.Grant{first, second} {
			stored, err := s.GrantGetByID(t.Context(), g.ID)
			noErr(t, err, "get")
			eq(t, stored.Uses, 2, "uses of "+g.ID)
		}
	}},
	{"ConcurrentWithoutLimitAllApproved", func(t *testing.T, s Store) {
		g := grantAction(t, s, "grant:free:0", at(0), nil)
		const n = 12
		got, errs := raceGrantTries(t, s, "grant:free", n)
		for i := range n {
			noErr(t, errs[i], fmt.Sprintf("submitter %d", i))
			eq(t, got[i].GrantID, g.ID, fmt.Sprintf("submitter %d: grant", i))
			grantedBy(t, s, got[i], g, at(time.Minute))
		}
		stored, err := s.GrantGetByID(t.Context(), g.ID)
		noErr(t, err, "get")
		eq(t, stored.Uses, n, "uses counted from the actions it approved")
	}},
	{"DryRunReadsWriteNothing", func(t *testing.T, s Store) {
		g := grantAction(t, s, "grant:dry:0", at(0), func(g *queue.Grant) { g.MaxUses = 1 })
		before := storeCounts(t, s, g.ID)
		p := queue.GrantFindParams{Tool: "send_customer_email", RequestedBy: agent, Payload: json.RawMessage(`{"customer_id":"c-1"}`), Now: at(time.Minute)}
		for range 3 {
			found, err := s.GrantFind(t.Context(), p)
			noErr(t, err, "find")
			eq(t, found.ID, g.ID, "found")
		}
		p.Payload = json.RawMessage(`{"customer_id":"c-9"}`)
		_, err := s.GrantFind(t.Context(), p)
		eq(t, errorsIsNotFound(err), true, "no match: not found")
		p.Payload, p.RequestedBy = json.RawMessage(`{"customer_id":"c-1"}`), "agent:other"
		_, err = s.GrantFind(t.Context(), p)
		eq(t, errorsIsNotFound(err), true, "other agent: not found")
		// The holder lookup of a dry run.
		_, err = s.ActionList(t.Context(), queue.ActionListParams{IntentKey: "grant:dry:0", Held: true, Limit: 1})
		noErr(t, err, "holder")
		eq(t, storeCounts(t, s, g.ID), before, "rows after the dry run's reads")
		// The use is still there for a real submission.
		eq(t, grantTry(t, s, "grant:dry:1", agent, `{"customer_id":"c-1"}`, at(time.Minute)).GrantID, g.ID, "used")
		_, err = s.GrantFind(t.Context(), queue.GrantFindParams{Tool: "send_customer_email", RequestedBy: agent,
			Payload: json.RawMessage(`{"customer_id":"c-1"}`), Now: at(2 * time.Minute)})
		eq(t, errorsIsNotFound(err), true, "used up: not found")
	}},
	// Grants end with their granter's right: removed, demoted (by an admin,
	// by an update, by the provider's groups) or refused by the identity
	// provider, each in the transaction that made it so.
	{"EndWithTheGranter", func(t *testing.T, s Store) {
		ctx := t.Context()
		cases := []struct {
			email, reason string
			take          func(u *accounts.User)
		}{
			{"bob@example.com", queue.GrantEndGranterRemoved, func(u *accounts.User) { noErr(t, s.UserDelete(ctx, u.ID), "remove bob") }},
			{"cara@example.com", queue.GrantEndGranterDemoted, func(u *accounts.User) {
				noErr(t, s.UserSetRole(ctx, accounts.UserSetRoleParams{ID: u.ID, Role: accounts.RoleViewer, Now: at(time.Hour)}), "demote cara")
			}},
			{"dan@example.com", queue.GrantEndGranterDemoted, func(u *accounts.User) {
				noErr(t, s.UserUpdate(ctx, accounts.UserUpdateParams{ID: u.ID, PasswordHash: "h", Role: accounts.RoleOps, Now: at(time.Hour)}), "update dan to ops")
			}},
			{"eve@example.com", queue.GrantEndGranterDemoted, func(u *accounts.User) {
				ssoSignIn(t, s, u.Email, accounts.RoleViewer, []string{"readers"}, at(time.Hour))
			}},
			{"fay@example.com", queue.GrantEndGranterRefused, func(u *accounts.User) {
				_, err := s.UserSSODeny(ctx, accounts.UserSSODenyParams{Email: u.Email, Subject: "sub-fay", Now: at(time.Hour)})
				noErr(t, err, "the provider refuses fay")
			}},
		}
		for i, tc := range cases {
			u := createUser(t, s, tc.email, accounts.RoleApprover, at(0))
			customer := fmt.Sprintf("c-end-%d", i)
			g := grantOf(t, s, tc.email, customer, at(0))
			eq(t, grantTryUnder(t, s, fmt.Sprintf("end:%d:before", i), customer, nil, at(time.Minute)).GrantID, g.ID, tc.email+": approves before")
			tc.take(u)
			grantEnded(t, s, g, tc.reason)
			eq(t, grantTryUnder(t, s, fmt.Sprintf("end:%d:after", i), customer, nil, at(2*time.Hour)).State, queue.StatePending, tc.email+": after")
		}
		// A promotion, a new password and a sign-in that keeps a deciding
		// role end nothing.
		ann := createUser(t, s, "ann2@example.com", accounts.RoleApprover, at(0))
		g := grantOf(t, s, ann.Email, "c-kept", at(0))
		noErr(t, s.UserSetRole(ctx, accounts.UserSetRoleParams{ID: ann.ID, Role: accounts.RoleAdmin, Now: at(time.Hour)}), "promote ann")
		noErr(t, s.UserSetPassword(ctx, accounts.UserSetPasswordParams{ID: ann.ID, PasswordHash: "h2", Now: at(time.Hour)}), "ann's password")
		ssoSignIn(t, s, ann.Email, accounts.RoleApprover, nil, at(time.Hour))
		kept, err := s.GrantGetByID(ctx, g.ID)
		noErr(t, err, "get")
		eq(t, kept.RevokedAt == nil, true, "ann's grant is not revoked")
		eq(t, grantTryUnder(t, s, "end:kept", "c-kept", nil, at(2*time.Hour)).GrantID, g.ID, "ann's grant still approves")
		// A person's revocation says so.
		r, err := s.GrantRevoke(ctx, queue.GrantRevokeParams{ID: g.ID, By: "user:ops@example.com", Now: at(3 * time.Hour),
			Event: queue.Event{Kind: queue.EventGrantRevoked, Actor: "user:ops@example.com", Channel: "dashboard", At: at(3 * time.Hour)}})
		noErr(t, err, "revoke")
		eq(t, r.EndReason, queue.GrantEndRevoked, "a person's revocation")
	}},
	// At the match, the granter must still be one who may decide the tool
	// under the approval rule now in force: by email, or by an identity
	// provider group as of their last sign-in.
	{"GranterMustStillDecideTheTool", func(t *testing.T, s Store) {
		ctx := t.Context()
		createUser(t, s, "ann@example.com", accounts.RoleApprover, at(0))
		ssoSignIn(t, s, "lee@example.com", accounts.RoleApprover, []string{"support-leads"}, at(0))
		annG := grantOf(t, s, "ann@example.com", "c-ann", at(0))
		leeG := grantOf(t, s, "lee@example.com", "c-lee", at(0))
		finance := &classify.Approval{Required: 1, Approvers: []string{"finance"}, ApproverEmails: []string{"fin@example.com"}}
		withAnn := &classify.Approval{Required: 1, Approvers: []string{"finance"}, ApproverEmails: []string{"ann@example.com", "fin@example.com"}}
		leads := &classify.Approval{Required: 1, Approvers: []string{"leads"}, ApproverIdPGroups: []string{"support-leads"}}
		for _, tc := range []struct {
			name, customer string
			approval       *classify.Approval
			want           string // the grant that approves, "" none
		}{
			{"ann, no approvers named", "c-ann", nil, annG.ID},
			{"ann, not among finance", "c-ann", finance, ""},
			{"ann, among them by email", "c-ann", withAnn, annG.ID},
			{"ann, not in the idp group", "c-ann", leads, ""},
			{"lee, in the idp group", "c-lee", leads, leeG.ID},
			{"lee, not among finance", "c-lee", finance, ""},
		} {
			find := queue.GrantFindParams{Tool: "send_customer_email", RequestedBy: agent,
				Payload: json.RawMessage(`{"customer_id":"` + tc.customer + `"}`), Now: at(time.Minute), Approval: tc.approval}
			found, err := s.GrantFind(ctx, find)
			if tc.want == "" {
				eq(t, errorsIsNotFound(err), true, tc.name+": dry run finds none")
			} else {
				noErr(t, err, tc.name+": dry run")
				eq(t, found.ID, tc.want, tc.name+": dry run")
			}
			got := grantTryUnder(t, s, "must:"+tc.name, tc.customer, tc.approval, at(time.Minute))
			eq(t, got.GrantID, tc.want, tc.name+": grant used")
		}
		// Lee's next sign-in finds them out of the group: their grant no
		// longer approves for the leads (it was not ended: another tool's
		// rule may still admit them).
		ssoSignIn(t, s, "lee@example.com", accounts.RoleApprover, []string{"support"}, at(time.Hour))
		eq(t, grantTryUnder(t, s, "must:lee:left", "c-lee", leads, at(2*time.Hour)).State, queue.StatePending, "lee out of the group")
		// A grant whose granting user no staff user is (one removed before
		// grants ended with them) approves nothing either.
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "must:ghost:0", at(0))
		ghost := &queue.Grant{ID: queue.NewID(at(0)), Tool: a.Tool, GrantedBy: "user:ghost@example.com", ActionID: a.ID,
			CreatedAt: at(0), ExpiresAt: at(8 * time.Hour), Fields: []queue.GrantField{{Path: "customer_id", Value: json.RawMessage(`"c-ghost"`)}}}
		p := decideParams(a.ID, queue.StateApproved, "user:ann@example.com", at(0))
		p.Grant = ghost
		p.GrantEvent = queue.Event{ActionID: a.ID, Kind: queue.EventGrantCreated, Actor: "user:ann@example.com", Channel: "dashboard", At: at(0)}
		_, err := s.ActionDecide(ctx, p)
		noErr(t, err, "a grant in the name of nobody")
		eq(t, grantTryUnder(t, s, "must:ghost", "c-ghost", nil, at(2*time.Hour)).State, queue.StatePending, "ghost's grant")
		// The batched submission judges alike (PostgreSQL's submitManySQL).
		got := batchGrantTries(t, s, []string{"c-ann", "c-lee", "c-ann"}, []*classify.Approval{finance, leads, withAnn}, at(3*time.Hour))
		eq(t, got[0].GrantID, "", "batch: ann not among finance")
		eq(t, got[1].GrantID, "", "batch: lee out of the group")
		eq(t, got[2].GrantID, annG.ID, "batch: ann among them by email")
	}},
}

// batchGrantTries submits, at once, one new action of each customer under
// the approval of the same index, each letting a grant approve it.
func batchGrantTries(t *testing.T, s Store, customers []string, approvals []*classify.Approval, now time.Time) []*queue.Action {
	t.Helper()
	got := make([]*queue.Action, len(customers))
	errs := make([]error, len(customers))
	race(len(customers), func(i int) {
		a := newAction(classify.AtMostOnce, "send_customer_email", fmt.Sprintf("batch:%d:%s", i, customers[i]), now)
		a.Payload, a.Spec.Approval = json.RawMessage(`{"customer_id":"`+customers[i]+`"}`), approvals[i]
		var res queue.ActionSubmitResult
		res, errs[i] = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a),
			Grant: &queue.GrantTry{Now: now, ExpiresAt: now.Add(time.Hour)}})
		got[i] = res.Holder
	})
	for i, err := range errs {
		noErr(t, err, fmt.Sprintf("batch submission %d", i))
	}
	return got
}

// grantOf approves a new action with a grant by email of the actions whose
// customer_id is customer (any agent, 8 hours, no limit).
func grantOf(t *testing.T, s Store, email, customer string, now time.Time) *queue.Grant {
	t.Helper()
	return grantAction(t, s, "grant:of:"+customer, now, func(g *queue.Grant) {
		g.GrantedBy, g.Agent = "user:"+email, ""
		g.Fields = []queue.GrantField{{Path: "customer_id", Value: json.RawMessage(`"` + customer + `"`)}}
	})
}

// grantTryUnder is grantTry of {"customer_id": customer} for a tool whose
// approval rule (the new action's snapshot) is approval.
func grantTryUnder(t *testing.T, s Store, key, customer string, approval *classify.Approval, now time.Time) *queue.Action {
	t.Helper()
	a := newAction(classify.AtMostOnce, "send_customer_email", key, now)
	a.Payload, a.Spec.Approval = json.RawMessage(`{"customer_id":"`+customer+`"}`), approval
	res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a),
		Grant: &queue.GrantTry{Now: now, ExpiresAt: now.Add(time.Hour)}})
	noErr(t, err, "submit "+key)
	if !res.Created {
		t.Fatalf("submit %s: not created", key)
	}
	return res.Holder
}

// grantEnded checks that g ended for reason, revoked by system at or after
// since, with a grant_revoked event on its action saying why.
func grantEnded(t *testing.T, s Store, g *queue.Grant, reason string) {
	t.Helper()
	got, err := s.GrantGetByID(t.Context(), g.ID)
	noErr(t, err, "get grant")
	if got.RevokedAt == nil {
		t.Fatalf("grant of %s: not revoked, want ended for %s", g.GrantedBy, reason)
	}
	strPtrEq(t, got.RevokedBy, ptr(queue.GrantSystemActor), g.GrantedBy+": revoked_by")
	eq(t, got.EndReason, reason, g.GrantedBy+": end_reason")
	var found bool
	for _, e := range events(t, s, g.ActionID) {
		if e.Kind == queue.EventGrantRevoked {
			found = true
			eq(t, e.Actor, queue.GrantSystemActor, g.GrantedBy+": grant_revoked actor")
			jsonEq(t, e.Data, json.RawMessage(`{"grant":"`+g.ID+`","reason":"`+reason+`"}`), g.GrantedBy+": grant_revoked data")
			// As the domain builds it, at the time the grant ended.
			eventAsGiven(t, e, queue.GrantEndOfUser(reason, *got.RevokedAt), "grant", g.ID, g.GrantedBy+": grant_revoked")
		}
	}
	eq(t, found, true, g.GrantedBy+": a grant_revoked event")
}

// raceGrantTries submits n new pending actions (keys prefix:1…n) at once,
// at(1m), each letting a grant approve it until at(61m), and returns what
// each submission answered.
func raceGrantTries(t *testing.T, s Store, prefix string, n int) ([]*queue.Action, []error) {
	got := make([]*queue.Action, n)
	errs := make([]error, n)
	race(n, func(i int) {
		a := newAction(classify.AtMostOnce, "send_customer_email", fmt.Sprintf("%s:%d", prefix, i+1), at(time.Minute))
		var res queue.ActionSubmitResult
		res, errs[i] = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a),
			Grant: &queue.GrantTry{Now: at(time.Minute), ExpiresAt: at(61 * time.Minute)}})
		got[i] = res.Holder
	})
	return got, errs
}

func grantIDs(list []*queue.Grant) []string {
	out := make([]string, len(list))
	for i, g := range list {
		out[i] = g.ID
	}
	return out
}

// storeCounts is what a dry run must leave as it was: the actions, the
// events, and the uses of grant id.
func storeCounts(t *testing.T, s Store, grantID string) string {
	t.Helper()
	actions, err := s.ActionList(t.Context(), queue.ActionListParams{Limit: 1000})
	noErr(t, err, "list actions")
	evs, err := s.EventList(t.Context(), queue.EventListParams{Limit: 1000})
	noErr(t, err, "list events")
	g, err := s.GrantGetByID(t.Context(), grantID)
	noErr(t, err, "get grant")
	return fmt.Sprintf("%d actions, %d events, %d uses", len(actions), len(evs), g.Uses)
}
