package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

var submitTests = []test{
	{"PendingRoundTrip", func(t *testing.T, s Store) {
		a := newAction(classify.AtMostOnce, "send_customer_email", "email:c-1:welcome", at(0))
		a.Warnings = []string{"intent_key_looks_random"}
		a.Channel = "mcp"
		a.Spec.Executor = &classify.Executor{Webhook: "http://127.0.0.1:9000/send", Timeout: 30 * time.Second}
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a)})
		got, created := res.Holder, res.Created
		noErr(t, err, "submit")
		eq(t, created, true, "created")
		eq(t, a.Attempt, 1, "attempt assigned to the submitted action")
		for _, g := range []*queue.Action{got, get(t, s, a.ID)} {
			eq(t, g.ID, a.ID, "id")
			eq(t, g.Tool, "send_customer_email", "tool")
			eq(t, g.Class, classify.AtMostOnce, "class")
			eq(t, g.IntentKey, "email:c-1:welcome", "intent key")
			eq(t, g.Attempt, 1, "attempt")
			eq(t, g.State, queue.StatePending, "state")
			jsonEq(t, g.Payload, a.Payload, "payload")
			eq(t, len(g.ApprovedPayload), 0, "approved payload length")
			eq(t, len(g.Result), 0, "result length")
			strPtrEq(t, g.Error, nil, "error")
			eq(t, g.RequestedBy, agent, "requested by")
			eq(t, g.Channel, "mcp", "channel")
			strPtrEq(t, g.DecidedBy, nil, "decided by")
			timeEq(t, g.CreatedAt, at(0), "created at")
			eq(t, g.CreatedAt.Location(), time.UTC, "created at location")
			timePtrEq(t, g.ExpiresAt, ptr(at(72*time.Hour)), "expires at")
			timePtrEq(t, g.DecidedAt, nil, "decided at")
			timePtrEq(t, g.FinishedAt, nil, "finished at")
			sliceEq(t, g.Warnings, []string{"intent_key_looks_random"}, "warnings")
			eq(t, g.Spec.Name, "send_customer_email", "spec name")
			eq(t, g.Spec.Class, classify.AtMostOnce, "spec class")
			eq(t, g.Spec.ClaimTimeout, 5*time.Minute, "spec claim timeout")
			eq(t, g.Spec.Check, "look it up", "spec check")
			eq(t, g.HasWebhook(), true, "spec executor")
			eq(t, g.Spec.Executor.Timeout, 30*time.Second, "spec executor timeout")
			if g.Ticket != nil {
				t.Fatalf("ticket: got %+v, want none", g.Ticket)
			}
		}
		evs := events(t, s, a.ID)
		eq(t, len(evs), 1, "events")
		eq(t, evs[0].Kind, queue.EventSubmitted, "event kind")
		eq(t, evs[0].ActionID, a.ID, "event action")
		eq(t, evs[0].Actor, agent, "event actor")
		eq(t, evs[0].Channel, "mcp", "event channel")
		timeEq(t, evs[0].At, at(0), "event at")
	}},
	{"ExactlyOnceIsClaimedBySubmission", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:o-1:l-1", at(0))
		eq(t, a.State, queue.StateInProgress, "state")
		eq(t, a.Attempt, 1, "attempt")
		timePtrEq(t, a.ClaimedAt, ptr(at(0)), "claimed at")
		strPtrEq(t, a.ClaimedBy, ptr(agent), "claimed by")
	}},
	{"HeldIntentIsUniqueAcrossTools", func(t *testing.T, s Store) {
		first := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "shared:key", at(0))
		recorded := 0
		for _, other := range []*queue.Action{
			newAction(classify.AtMostOnce, "send_customer_email", "shared:key", at(time.Minute)),
			newAction(classify.AtMostOnce, "post_publicly", "shared:key", at(time.Minute)),
			newAction(classify.ExactlyOnce, "issue_refund", "shared:key", at(time.Minute)),
		} {
			res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: other, Event: submittedEvent(other)})
			holder, created, replay := res.Holder, res.Created, res.ReplayRecorded
			noErr(t, err, "submit")
			eq(t, created, false, "created")
			eq(t, holder.ID, first.ID, "holder")
			if replay {
				// Only a submission with the holder's tool and payload text
				// may have its replay recorded by the store.
				eq(t, other.Tool, holder.Tool, "tool of a replay the store recorded")
				recorded++
			}
			eq(t, holder.Tool, "send_customer_email", "holder tool")
			eq(t, holder.State, queue.StatePending, "holder state")
			_, err = s.ActionGetByID(t.Context(), other.ID)
			isErr(t, err, queue.ErrNotFound, "refused action stored")
			eq(t, len(events(t, s, other.ID)), 0, "events of the refused action")
		}
		kinds := eventKinds(t, s, first.ID)
		eq(t, len(kinds), 1+recorded, "events of the holder")
		eq(t, countKind(kinds, queue.EventReplayed), recorded, "replay events the store recorded")
	}},
	{"ReleasedStatesStartTheNextAttempt", func(t *testing.T, s Store) {
		releases := []struct {
			state   queue.State
			class   classify.Class
			release func(t *testing.T, a *queue.Action, now time.Time)
		}{
			{queue.StateExpired, classify.AtMostOnce, func(t *testing.T, a *queue.Action, now time.Time) {
				transition(t, s, expireParams(a.ID, queue.StatePending, now))
			}},
			{queue.StateCancelled, classify.AtMostOnce, func(t *testing.T, a *queue.Action, now time.Time) {
				transition(t, s, cancelParams(a.ID, now))
			}},
			{queue.StateFailed, classify.ExactlyOnce, func(t *testing.T, a *queue.Action, now time.Time) {
				transition(t, s, failParams(a.ID, now, "card declined"))
			}},
		}
		for _, r := range releases {
			key := "release:" + string(r.state)
			var prev *queue.Action
			for attempt := 1; attempt <= 3; attempt++ {
				now := at(time.Duration(attempt) * time.Hour)
				a := submitNew(t, s, r.class, "tool_"+string(r.class), key, now)
				eq(t, a.Attempt, attempt, string(r.state)+": attempt")
				if prev != nil {
					eq(t, get(t, s, prev.ID).State, r.state, string(r.state)+": earlier attempt state")
				}
				r.release(t, a, now.Add(time.Minute))
				prev = a
			}
			list, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: key, Limit: 10})
			noErr(t, err, "list attempts")
			eq(t, len(list), 3, string(r.state)+": attempts listed")
		}
	}},
	{"RejectedHoldsForever", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "email:c-1:promo", at(0))
		transition(t, s, rejectParams(a.ID, "user:ann@example.com", at(time.Minute)))
		_, err := s.ActionExpireDue(t.Context(), queue.ExpiryDue(at(1000*time.Hour), 100))
		noErr(t, err, "expire due")
		again := newAction(classify.AtMostOnce, "send_customer_email", "email:c-1:promo", at(1000*time.Hour))
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: again, Event: submittedEvent(again)})
		holder, created := res.Holder, res.Created
		noErr(t, err, "resubmit")
		eq(t, created, false, "created")
		eq(t, holder.ID, a.ID, "holder")
		eq(t, holder.State, queue.StateRejected, "holder state")
		strPtrEq(t, holder.DecisionNote, ptr("not this customer"), "rejection reason")
	}},
	{"DoneHolds", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:o-2:l-1", at(0))
		transition(t, s, completeParams(a.ID, at(time.Minute), `{"refund_id":"r-9"}`))
		again := newAction(classify.ExactlyOnce, "issue_refund", "refund:o-2:l-1", at(time.Hour))
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: again, Event: submittedEvent(again)})
		holder, created := res.Holder, res.Created
		noErr(t, err, "resubmit")
		eq(t, created, false, "created")
		eq(t, holder.ID, a.ID, "holder")
		eq(t, holder.State, queue.StateDone, "holder state")
		jsonEq(t, holder.Result, []byte(`{"refund_id":"r-9"}`), "holder result")
	}},
	{"InProgressHolds", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:o-3:l-1", at(0))
		again := newAction(classify.ExactlyOnce, "issue_refund", "refund:o-3:l-1", at(time.Second))
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: again, Event: submittedEvent(again)})
		holder, created := res.Holder, res.Created
		noErr(t, err, "resubmit")
		eq(t, created, false, "created")
		eq(t, holder.ID, a.ID, "holder")
		eq(t, holder.State, queue.StateInProgress, "holder state")
	}},
	{"RecordedHoldsNothing", func(t *testing.T, s Store) {
		for i := range 3 {
			now := at(time.Duration(i) * time.Minute)
			r := newAction(classify.AtLeastOnce, "invalidate_cache", "cache:users", now)
			r.FinishedAt = ptr(now) // recorded: finished when it is submitted
			a := submit(t, s, r)
			eq(t, a.State, queue.StateRecorded, "state")
			eq(t, a.Attempt, 1, "attempt")
			timePtrEq(t, get(t, s, a.ID).FinishedAt, ptr(now), "finished at of a recorded action")
		}
		blank := submitNew(t, s, classify.AtLeastOnce, "invalidate_cache", "", at(time.Hour))
		eq(t, blank.Attempt, 1, "attempt without a key")
		// Recorded actions neither hold the key nor count as attempts.
		held := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "cache:users", at(2*time.Hour))
		eq(t, held.Attempt, 1, "attempt of a held action after recorded ones")
		// And a held key does not stop a recording.
		rec := submitNew(t, s, classify.AtLeastOnce, "invalidate_cache", "cache:users", at(3*time.Hour))
		eq(t, rec.Attempt, 1, "attempt of a recording while the key is held")
		list, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: "cache:users", Limit: 10})
		noErr(t, err, "list")
		eq(t, len(list), 5, "actions of the key")
	}},
	{"AtLeastOnceOutcomesHoldNothing", func(t *testing.T, s Store) {
		// An at-least-once call made through an upstream ends done or
		// failed; like recorded, neither holds its key.
		for _, to := range []queue.State{queue.StateDone, queue.StateFailed} {
			key := "lookup:" + string(to)
			first := submitNew(t, s, classify.AtLeastOnce, "crm_lookup", key, at(0))
			transition(t, s, recordOutcomeParams(first.ID, to, at(time.Second)))

			// Another at-least-once call with the key is a new action, not
			// a replay of the finished one.
			again := newAction(classify.AtLeastOnce, "crm_lookup", key, at(time.Minute))
			res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: again, Event: submittedEvent(again)})
			got, created, replay := res.Holder, res.Created, res.ReplayRecorded
			noErr(t, err, string(to)+": second at-least-once submission")
			eq(t, created, true, string(to)+": second at-least-once submission created")
			eq(t, replay, false, string(to)+": replay recorded")
			eq(t, got.ID, again.ID, string(to)+": second at-least-once action")
			eq(t, got.State, queue.StateRecorded, string(to)+": second at-least-once state")
			eq(t, got.Attempt, 1, string(to)+": second at-least-once attempt")

			// An exactly-once submission with the key claims it as attempt
			// 1 rather than finding the at-least-once action as its holder,
			// and then holds it against the next one.
			claim := newAction(classify.ExactlyOnce, "issue_refund", key, at(2*time.Minute))
			res, err = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: claim, Event: submittedEvent(claim)})
			got, created = res.Holder, res.Created
			noErr(t, err, string(to)+": exactly-once submission")
			eq(t, created, true, string(to)+": exactly-once submission created")
			eq(t, got.ID, claim.ID, string(to)+": exactly-once holder")
			eq(t, got.State, queue.StateInProgress, string(to)+": exactly-once state")
			eq(t, got.Attempt, 1, string(to)+": exactly-once attempt")
			next := newAction(classify.ExactlyOnce, "issue_refund", key, at(3*time.Minute))
			res, err = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: next, Event: submittedEvent(next)})
			got, created = res.Holder, res.Created
			noErr(t, err, string(to)+": second exactly-once submission")
			eq(t, created, false, string(to)+": second exactly-once submission created")
			eq(t, got.ID, claim.ID, string(to)+": holder of the second exactly-once submission")

			// The finished at-least-once action is as it was.
			eq(t, get(t, s, first.ID).State, to, string(to)+": first at-least-once state")
			list, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: key, Limit: 10})
			noErr(t, err, "list")
			eq(t, len(list), 3, string(to)+": actions of the key")
		}
	}},
	{"AtLeastOnceStaysOutOfOtherStates", func(t *testing.T, s Store) {
		// The schema refuses an at-least-once action in any state but
		// recorded, done and failed, and recorded for any other class.
		for _, st := range []queue.State{queue.StatePending, queue.StateInProgress} {
			a := newAction(classify.AtLeastOnce, "crm_lookup", "", at(0))
			a.State = st
			a.ClaimedAt = ptr(at(0))
			if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a)}); err == nil {
				t.Errorf("at-least-once action stored as %s", st)
			}
		}
		a := newAction(classify.ExactlyOnce, "issue_refund", "refund:rec", at(0))
		a.State = queue.StateRecorded
		if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a)}); err == nil {
			t.Error("exactly-once action stored as recorded")
		}
		r := submitNew(t, s, classify.AtLeastOnce, "crm_lookup", "", at(0))
		p := queue.ActionTransitionParams{ID: r.ID, From: []queue.State{queue.StateRecorded}, To: queue.StateInProgress, Now: at(time.Minute),
			ClaimedAt: ptr(at(time.Minute)), ClaimedBy: ptr(agent), ClaimDeadline: ptr(at(time.Hour)),
			Event: queue.Event{Kind: queue.EventClaimed, Actor: agent, At: at(time.Minute)}}
		if _, err := s.ActionTransition(t.Context(), p); err == nil {
			t.Error("at-least-once action moved to in_progress")
		}
		eq(t, get(t, s, r.ID).State, queue.StateRecorded, "state after the refused transition")
	}},
	{"GetUnknown", func(t *testing.T, s Store) {
		for _, id := range []string{queue.NewID(at(0)), "not-a-uuid", ""} {
			_, err := s.ActionGetByID(t.Context(), id)
			isErr(t, err, queue.ErrNotFound, "get "+id)
		}
	}},
	{"CountByState", func(t *testing.T, s Store) {
		counts, err := s.ActionCountByState(t.Context())
		noErr(t, err, "count empty")
		eq(t, len(counts), 0, "states counted in an empty store")
		p := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "count:1", at(0))
		submitNew(t, s, classify.AtMostOnce, "send_customer_email", "count:2", at(0))
		submitNew(t, s, classify.ExactlyOnce, "issue_refund", "count:3", at(0))
		submitNew(t, s, classify.AtLeastOnce, "invalidate_cache", "", at(0))
		approve(t, s, p.ID, at(time.Minute))
		counts, err = s.ActionCountByState(t.Context())
		noErr(t, err, "count")
		eq(t, counts[queue.StatePending], 1, "pending")
		eq(t, counts[queue.StateApproved], 1, "approved")
		eq(t, counts[queue.StateInProgress], 1, "in progress")
		eq(t, counts[queue.StateRecorded], 1, "recorded")
		eq(t, counts[queue.StateDone], 0, "done")
	}},
}

var transitionTests = []test{
	{"DriverConditions", func(t *testing.T, s Store) {
		// Only the submitting agent drives its action, in the same
		// conditional statement: a stranger changes nothing.
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "drive:1", at(0))
		approve(t, s, a.ID, at(time.Minute))
		p := executeParams(a.ID, at(2*time.Minute), at(10*time.Minute))
		p.RequestedBy, p.AgentExecuted = "agent:stranger", true
		got, err := s.ActionTransition(t.Context(), p)
		isErr(t, err, queue.ErrStateMismatch, "execute by another agent")
		eq(t, got.State, queue.StateApproved, "state after a stranger's execute")
		eq(t, got.RequestedBy, agent, "requested_by returned with the mismatch")
		p.RequestedBy = agent
		eq(t, transition(t, s, p).State, queue.StateInProgress, "execute by the submitting agent")

		// A webhook tool's action is not the agent's to execute.
		w := newAction(classify.AtMostOnce, "send_customer_email", "drive:2", at(0))
		w.Spec.Executor = &classify.Executor{Webhook: "http://127.0.0.1:9000/send", Timeout: 30 * time.Second}
		submit(t, s, w)
		approve(t, s, w.ID, at(time.Minute))
		p = executeParams(w.ID, at(2*time.Minute), at(10*time.Minute))
		p.RequestedBy, p.AgentExecuted = agent, true
		got, err = s.ActionTransition(t.Context(), p)
		isErr(t, err, queue.ErrStateMismatch, "agent execute of a webhook action")
		eq(t, got.State, queue.StateApproved, "state after a refused agent execute")
		p.AgentExecuted = false // the dispatcher's claim
		eq(t, transition(t, s, p).State, queue.StateInProgress, "dispatcher claim of a webhook action")
	}},
	{"StateMachine", func(t *testing.T, s Store) {
		// setup returns an action in the case's from-state.
		pending := func(t *testing.T, key string) *queue.Action {
			return submitNew(t, s, classify.AtMostOnce, "send_customer_email", key, at(0))
		}
		approved := func(t *testing.T, key string) *queue.Action {
			return approve(t, s, pending(t, key).ID, at(time.Minute))
		}
		executing := func(t *testing.T, key string) *queue.Action {
			return transition(t, s, executeParams(approved(t, key).ID, at(2*time.Minute), at(12*time.Minute)))
		}
		claimed := func(t *testing.T, key string) *queue.Action {
			return submitNew(t, s, classify.ExactlyOnce, "issue_refund", key, at(0))
		}
		recorded := func(t *testing.T, key string) *queue.Action {
			return submitNew(t, s, classify.AtLeastOnce, "crm_lookup", key, at(0))
		}
		now := at(time.Hour)
		cases := []struct {
			name   string
			setup  func(t *testing.T, key string) *queue.Action
			params func(id string) queue.ActionTransitionParams
			check  func(t *testing.T, a *queue.Action)
		}{
			{"approve", pending, func(id string) queue.ActionTransitionParams {
				p := approveParams(id, "user:ann@example.com", now)
				p.ApprovedPayload = json.RawMessage(`{"customer_id":"c-1","amount":10}`)
				return p
			}, func(t *testing.T, a *queue.Action) {
				strPtrEq(t, a.DecidedBy, ptr("user:ann@example.com"), "decided by")
				strPtrEq(t, a.DecisionNote, ptr("looks right"), "note")
				timePtrEq(t, a.DecidedAt, ptr(now), "decided at")
				timePtrEq(t, a.ExpiresAt, ptr(now.Add(72*time.Hour)), "expires at moved")
				jsonEq(t, a.ApprovedPayload, []byte(`{"amount":10,"customer_id":"c-1"}`), "approved payload")
				jsonEq(t, a.Payload, []byte(`{"customer_id":"c-1","amount":12,"note":"käse"}`), "payload kept")
			}},
			{"reject", pending, func(id string) queue.ActionTransitionParams {
				return rejectParams(id, "user:bob@example.com", now)
			}, func(t *testing.T, a *queue.Action) {
				strPtrEq(t, a.DecidedBy, ptr("user:bob@example.com"), "decided by")
				strPtrEq(t, a.DecisionNote, ptr("not this customer"), "note")
				timePtrEq(t, a.DecidedAt, ptr(now), "decided at")
			}},
			{"cancel pending", pending, func(id string) queue.ActionTransitionParams {
				return cancelParams(id, now)
			}, func(t *testing.T, a *queue.Action) {
				strPtrEq(t, a.DecidedBy, ptr(agent), "decided by")
				timePtrEq(t, a.FinishedAt, ptr(now), "finished at")
			}},
			{"cancel approved", approved, func(id string) queue.ActionTransitionParams {
				return cancelParams(id, now)
			}, func(t *testing.T, a *queue.Action) {
				strPtrEq(t, a.DecidedBy, ptr(agent), "decided by")
			}},
			{"expire pending", pending, func(id string) queue.ActionTransitionParams {
				p := expireParams(id, queue.StatePending, now)
				p.DecidedBy = ptr("system")
				return p
			}, func(t *testing.T, a *queue.Action) {
				strPtrEq(t, a.DecidedBy, ptr("system"), "decided by")
			}},
			{"expire approved", approved, func(id string) queue.ActionTransitionParams {
				return expireParams(id, queue.StateApproved, now)
			}, func(t *testing.T, a *queue.Action) {
				strPtrEq(t, a.DecidedBy, ptr("user:ann@example.com"), "decided by kept")
			}},
			{"execute", approved, func(id string) queue.ActionTransitionParams {
				return executeParams(id, now, now.Add(10*time.Minute))
			}, func(t *testing.T, a *queue.Action) {
				timePtrEq(t, a.ClaimedAt, ptr(now), "claimed at")
				strPtrEq(t, a.ClaimedBy, ptr(agent), "claimed by")
				strPtrEq(t, a.DecidedBy, ptr("user:ann@example.com"), "decided by kept")
				jsonEq(t, a.ApprovedPayload, nil, "approved payload untouched")
			}},
			{"complete executed", executing, func(id string) queue.ActionTransitionParams {
				return completeParams(id, now, `{"message_id":"m-1"}`)
			}, func(t *testing.T, a *queue.Action) {
				jsonEq(t, a.Result, []byte(`{"message_id":"m-1"}`), "result")
				timePtrEq(t, a.FinishedAt, ptr(now), "finished at")
			}},
			{"complete claimed", claimed, func(id string) queue.ActionTransitionParams {
				return completeParams(id, now, `{"refund_id":"r-1","amount":12.5}`)
			}, func(t *testing.T, a *queue.Action) {
				jsonEq(t, a.Result, []byte(`{"amount":12.5,"refund_id":"r-1"}`), "result")
			}},
			{"fail claimed", claimed, func(id string) queue.ActionTransitionParams {
				return failParams(id, now, "card declined")
			}, func(t *testing.T, a *queue.Action) {
				strPtrEq(t, a.Error, ptr("card declined"), "error")
				timePtrEq(t, a.FinishedAt, ptr(now), "finished at")
			}},
			{"fail executed", executing, func(id string) queue.ActionTransitionParams {
				return failParams(id, now, "422 from the receiver")
			}, func(t *testing.T, a *queue.Action) {
				strPtrEq(t, a.Error, ptr("422 from the receiver"), "error")
			}},
			{"record an upstream call done", recorded, func(id string) queue.ActionTransitionParams {
				return recordOutcomeParams(id, queue.StateDone, now)
			}, func(t *testing.T, a *queue.Action) {
				jsonEq(t, a.Result, []byte(`{"content":[{"type":"text","text":"found"}],"isError":false}`), "result")
				strPtrEq(t, a.Error, nil, "error")
				timePtrEq(t, a.FinishedAt, ptr(now), "finished at")
			}},
			{"record an upstream call failed", recorded, func(id string) queue.ActionTransitionParams {
				return recordOutcomeParams(id, queue.StateFailed, now)
			}, func(t *testing.T, a *queue.Action) {
				jsonEq(t, a.Result, []byte(`{"content":[{"type":"text","text":"not found"}],"isError":true}`), "result")
				strPtrEq(t, a.Error, ptr("not found"), "error")
				timePtrEq(t, a.FinishedAt, ptr(now), "finished at")
			}},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				a := c.setup(t, "machine:"+string(rune('a'+i)))
				p := c.params(a.ID)
				before := len(events(t, s, a.ID))
				got := transition(t, s, p)
				eq(t, got.ID, a.ID, "id")
				c.check(t, got)
				c.check(t, get(t, s, a.ID))
				kinds := eventKinds(t, s, a.ID)
				eq(t, len(kinds), before+1, "events appended")
				eq(t, kinds[len(kinds)-1], p.Event.Kind, "event kind")

				// The same transition again finds the action moved on.
				cur, err := s.ActionTransition(t.Context(), p)
				isErr(t, err, queue.ErrStateMismatch, "repeat")
				if cur == nil {
					t.Fatal("repeat: no current action returned with the mismatch")
				}
				eq(t, cur.ID, a.ID, "current id")
				eq(t, cur.State, p.To, "current state")
				eq(t, len(events(t, s, a.ID)), before+1, "events after the refused repeat")
			})
		}
	}},
	{"MismatchReturnsCurrent", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:o-4:l-1", at(0))
		transition(t, s, completeParams(a.ID, at(time.Minute), `{"ok":true}`))
		for _, p := range []queue.ActionTransitionParams{
			approveParams(a.ID, "user:ann@example.com", at(time.Hour)),
			failParams(a.ID, at(time.Hour), "late"),
			cancelParams(a.ID, at(time.Hour)),
		} {
			cur, err := s.ActionTransition(t.Context(), p)
			isErr(t, err, queue.ErrStateMismatch, "transition from done to "+string(p.To))
			if errorsIsNotFound(err) {
				t.Fatalf("transition of an existing action: %v matches ErrNotFound", err)
			}
			eq(t, cur.State, queue.StateDone, "current state")
			jsonEq(t, cur.Result, []byte(`{"ok":true}`), "current result")
			strPtrEq(t, cur.Error, nil, "current error")
		}
	}},
	{"NotFound", func(t *testing.T, s Store) {
		for _, id := range []string{queue.NewID(at(0)), "not-a-uuid"} {
			_, err := s.ActionTransition(t.Context(), approveParams(id, "user:ann@example.com", at(0)))
			isErr(t, err, queue.ErrNotFound, "transition of "+id)
		}
	}},
	{"NilFieldsAreKept", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "keep:1", at(0))
		p := approveParams(a.ID, "user:ann@example.com", at(time.Minute))
		p.ApprovedPayload = json.RawMessage(`{"edited":true}`)
		transition(t, s, p)
		got := transition(t, s, executeParams(a.ID, at(2*time.Minute), at(12*time.Minute)))
		got = transition(t, s, completeParams(got.ID, at(3*time.Minute), `{"sent":true}`))
		strPtrEq(t, got.DecidedBy, ptr("user:ann@example.com"), "decided by")
		strPtrEq(t, got.DecisionNote, ptr("looks right"), "decision note")
		timePtrEq(t, got.DecidedAt, ptr(at(time.Minute)), "decided at")
		jsonEq(t, got.ApprovedPayload, []byte(`{"edited":true}`), "approved payload")
		timePtrEq(t, got.ClaimedAt, ptr(at(2*time.Minute)), "claimed at")
		timePtrEq(t, got.ExpiresAt, ptr(at(time.Minute+72*time.Hour)), "expires at")
		sliceEq(t, eventKinds(t, s, a.ID), []string{queue.EventSubmitted, queue.EventApproved, queue.EventClaimed,
			queue.EventCompleted}, "timeline")
	}},
	{"UnexpiredRefusesLateApproval", func(t *testing.T, s Store) {
		a := newAction(classify.AtMostOnce, "send_customer_email", "late:1", at(0))
		a.ExpiresAt = ptr(at(time.Hour))
		submit(t, s, a)
		for _, now := range []time.Time{at(time.Hour), at(time.Hour + time.Second), at(48 * time.Hour)} {
			cur, err := s.ActionTransition(t.Context(), approveParams(a.ID, "user:ann@example.com", now))
			isErr(t, err, queue.ErrStateMismatch, "approval at "+now.Format(time.RFC3339))
			eq(t, cur.State, queue.StatePending, "state after a refused approval")
			strPtrEq(t, cur.DecidedBy, nil, "decided by after a refused approval")
		}
		// Without Unexpired the expiry is no condition: the agent may
		// still withdraw an overdue request the sweep has not reached.
		transition(t, s, cancelParams(a.ID, at(2*time.Hour)))

		b := newAction(classify.AtMostOnce, "send_customer_email", "late:2", at(0))
		b.ExpiresAt = ptr(at(time.Hour))
		submit(t, s, b)
		approve(t, s, b.ID, at(time.Hour-time.Second))
	}},
}

var expireTests = []test{
	{"PendingAndApproved", func(t *testing.T, s Store) {
		due := newAction(classify.AtMostOnce, "send_customer_email", "exp:pending", at(0))
		due.ExpiresAt = ptr(at(time.Hour))
		submit(t, s, due)
		notDue := newAction(classify.AtMostOnce, "send_customer_email", "exp:later", at(0))
		notDue.ExpiresAt = ptr(at(10 * time.Hour))
		submit(t, s, notDue)
		ap := newAction(classify.AtMostOnce, "send_customer_email", "exp:approved", at(0))
		submit(t, s, ap)
		p := approveParams(ap.ID, "user:ann@example.com", at(10*time.Minute))
		p.ExpiresAt = ptr(at(2 * time.Hour))
		transition(t, s, p)

		now := at(3 * time.Hour)
		due3h := queue.ExpiryDue(now, 100)
		got, err := s.ActionExpireDue(t.Context(), due3h)
		noErr(t, err, "expire due")
		eq(t, len(got), 2, "expired actions")
		byID := map[string]*queue.Action{}
		for _, a := range got {
			byID[a.ID] = a
		}
		for _, a := range []*queue.Action{byID[due.ID], get(t, s, due.ID)} {
			if a == nil {
				t.Fatal("the pending action was not expired")
			}
			eq(t, a.State, queue.StateExpired, "pending: state")
			strPtrEq(t, a.DecidedBy, ptr("system"), "pending: decided by")
			timePtrEq(t, a.DecidedAt, ptr(now), "pending: decided at")
			timePtrEq(t, a.FinishedAt, ptr(now), "pending: finished at")
		}
		for _, a := range []*queue.Action{byID[ap.ID], get(t, s, ap.ID)} {
			if a == nil {
				t.Fatal("the approved action was not expired")
			}
			eq(t, a.State, queue.StateExpired, "approved: state")
			strPtrEq(t, a.DecidedBy, ptr("user:ann@example.com"), "approved: decided by kept")
			timePtrEq(t, a.DecidedAt, ptr(at(10*time.Minute)), "approved: decided at kept")
			timePtrEq(t, a.FinishedAt, ptr(now), "approved: finished at")
		}
		eq(t, get(t, s, notDue.ID).State, queue.StatePending, "not yet due")
		for _, id := range []string{due.ID, ap.ID} {
			evs := events(t, s, id)
			eq(t, evs[0].Kind, queue.EventExpired, "newest event")
			eq(t, evs[0].Actor, "system", "expiry actor")
			timeEq(t, evs[0].At, now, "expiry event at")
			eventAsGiven(t, evs[0], due3h.Event, "", "", "expiry event")
		}
		again, err := s.ActionExpireDue(t.Context(), queue.ExpiryDue(now, 100))
		noErr(t, err, "expire again")
		eq(t, len(again), 0, "expired again")
		eq(t, countKind(eventKinds(t, s, due.ID), queue.EventExpired), 1, "expiry events")
	}},
	{"AtExpiresAtAndLimit", func(t *testing.T, s Store) {
		var all []string
		for i := range 3 {
			a := newAction(classify.AtMostOnce, "send_customer_email", "exp:limit:"+string(rune('a'+i)), at(0))
			a.ExpiresAt = ptr(at(time.Hour))
			all = append(all, submit(t, s, a).ID)
		}
		got, err := s.ActionExpireDue(t.Context(), queue.ExpiryDue(at(time.Hour-time.Second), 10))
		noErr(t, err, "expire before")
		eq(t, len(got), 0, "expired a second early")
		got, err = s.ActionExpireDue(t.Context(), queue.ExpiryDue(at(time.Hour), 2))
		noErr(t, err, "expire first batch")
		eq(t, len(got), 2, "first batch")
		got, err = s.ActionExpireDue(t.Context(), queue.ExpiryDue(at(time.Hour), 2))
		noErr(t, err, "expire second batch")
		eq(t, len(got), 1, "second batch")
		for _, id := range all {
			eq(t, get(t, s, id).State, queue.StateExpired, "state")
		}
	}},
	{"OtherStatesUntouched", func(t *testing.T, s Store) {
		rej := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "exp:rejected", at(0))
		transition(t, s, rejectParams(rej.ID, "user:ann@example.com", at(time.Minute)))
		run := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "exp:running", at(0))
		approve(t, s, run.ID, at(time.Minute))
		transition(t, s, executeParams(run.ID, at(2*time.Minute), at(7*time.Minute)))
		claim := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "exp:claim", at(0))
		rec := submitNew(t, s, classify.AtLeastOnce, "invalidate_cache", "exp:rec", at(0))
		got, err := s.ActionExpireDue(t.Context(), queue.ExpiryDue(at(10000*time.Hour), 100))
		noErr(t, err, "expire")
		eq(t, len(got), 0, "expired")
		eq(t, get(t, s, rej.ID).State, queue.StateRejected, "rejected")
		eq(t, get(t, s, run.ID).State, queue.StateInProgress, "executing")
		eq(t, get(t, s, claim.ID).State, queue.StateInProgress, "claimed")
		eq(t, get(t, s, rec.ID).State, queue.StateRecorded, "recorded")
	}},
}
