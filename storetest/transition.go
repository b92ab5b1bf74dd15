package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

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
