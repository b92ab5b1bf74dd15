// Package storetest is the conformance suite every store runs: the same
// tests against SQLite and PostgreSQL, in the manner of River's
// riverdrivertest.Exercise. Each subtest runs in parallel on a fresh store,
// drives it only through queue.Store and accounts.Store, and passes every
// time in explicitly (a fixed clock), so nothing here depends on the
// database behind the interfaces or on the wall clock.
//
// Where the interface comments are silent the suite pins what a careful
// caller expects, so that both stores answer alike:
//   - any id that names nothing, malformed ones included ("not-a-uuid", ""),
//     is queue.ErrNotFound, never a driver error (it would surface as a 5xx);
//   - an event or conflict ticket for an unknown action is queue.ErrNotFound;
//   - times come back in UTC;
//   - ActionSubmit of an in_progress (exactly-once) action derives the claim
//     deadline from ClaimedAt (else CreatedAt) plus Spec.ClaimTimeout, since
//     Action carries no deadline of its own;
//   - IntentKeyPrefix is literal and case-sensitive: %, _, \, *, ? and [ match
//     only themselves;
//   - a stale ticket resolved by a late report carries a note saying so, and
//     TicketResolve records an event of kind ticket_resolved by p.By;
//   - UserSetRole, UserSetPassword and UserDelete of an unknown user are
//     accounts.ErrNotFound; SessionDelete of an absent session is not an error;
//     a session with UserID 0 (before login) is stored and read back as 0.
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
)

// Store is what a storage adapter implements.
type Store = storage.Store

// Exercise runs the whole suite. newStore must return an empty, migrated
// store of its own for each call and close it in t.Cleanup.
func Exercise(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()
	groups := []struct {
		name  string
		tests []test
	}{
		{"ActionSubmit", submitTests},
		{"ActionTransition", transitionTests},
		{"ActionExpireDue", expireTests},
		{"Sweep", sweepTests},
		{"ActionList", listTests},
		{"Event", eventTests},
		{"Ticket", ticketTests},
		{"Accounts", accountTests},
		{"SSO", ssoTests},
		{"Subscribe", subscribeTests},
		{"Concurrency", concurrencyTests},
		{"Bulk", bulkTests},
		{"Overview", overviewTests},
		{"LockOrder", lockOrderTests},
		{"ActionDecide", decideTests},
		{"Routing", routingTests},
		{"ReturnedEqualsStored", returnedTests},
		{"Audit", auditTests},
		{"Policy", policyTests},
		{"Grant", grantTests},
		{"ReasonPrompt", reasonPromptTests},
		{"TicketCheck", verifyTests},
		{"Plan", planTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, newStore(t))
				})
			}
		})
	}
}

type test struct {
	name string
	run  func(t *testing.T, s Store)
}

// t0 is the suite's clock: every time a test passes in is t0 plus an offset.
// Whole seconds, so that every store keeps them exactly.
var t0 = time.Date(2031, time.March, 14, 9, 26, 53, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const agent = "agent:suite"

func ptr[T any](v T) *T { return &v }

// newAction returns an action of class as the service would submit it at
// now: every required field filled, in the state its class starts in.
func newAction(class classify.Class, tool, key string, now time.Time) *queue.Action {
	a := &queue.Action{
		ID:          queue.NewID(now),
		Tool:        tool,
		Class:       class,
		IntentKey:   key,
		Payload:     json.RawMessage(`{"customer_id":"c-1","amount":12,"note":"käse"}`),
		RequestedBy: agent,
		CreatedAt:   now,
		Channel:     "api",
		Spec: classify.Tool{Name: tool, Class: class, Registered: true, Reason: "class set in the tools file",
			ClaimTimeout: 5 * time.Minute, ExpiresAfter: 72 * time.Hour, Check: "look it up"},
	}
	switch class {
	case classify.AtMostOnce:
		a.State = queue.StatePending
		a.ExpiresAt = ptr(now.Add(72 * time.Hour))
	case classify.ExactlyOnce:
		a.State = queue.StateInProgress
		a.ClaimedAt = ptr(now)
		a.ClaimedBy = ptr(agent)
	case classify.AtLeastOnce:
		a.State = queue.StateRecorded
	}
	return a
}

func submittedEvent(a *queue.Action) queue.Event {
	return queue.Event{ActionID: a.ID, Kind: queue.EventSubmitted, Actor: a.RequestedBy, Channel: a.Channel, At: a.CreatedAt}
}

// submit inserts a and fails the test unless it became the holder.
func submit(t *testing.T, s Store, a *queue.Action) *queue.Action {
	t.Helper()
	res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a)})
	got, created := res.Holder, res.Created
	noErr(t, err, "submit")
	if !created {
		t.Fatalf("submit %s (%s): not created; holder %s in state %s", a.ID, a.IntentKey, got.ID, got.State)
	}
	return got
}

// submitNew builds and submits an action.
func submitNew(t *testing.T, s Store, class classify.Class, tool, key string, now time.Time) *queue.Action {
	t.Helper()
	return submit(t, s, newAction(class, tool, key, now))
}

func transition(t *testing.T, s Store, p queue.ActionTransitionParams) *queue.Action {
	t.Helper()
	a, err := s.ActionTransition(t.Context(), p)
	noErr(t, err, fmt.Sprintf("transition %v -> %s", p.From, p.To))
	if a.State != p.To {
		t.Fatalf("transition %v -> %s: action is %s", p.From, p.To, a.State)
	}
	return a
}

func approveParams(id, by string, now time.Time) queue.ActionTransitionParams {
	return queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StatePending}, To: queue.StateApproved, Now: now,
		Unexpired: true, DecidedBy: ptr(by), DecidedAt: ptr(now), DecisionNote: ptr("looks right"),
		ExpiresAt: ptr(now.Add(72 * time.Hour)),
		Event:     queue.Event{Kind: queue.EventApproved, Actor: by, Channel: "dashboard", At: now}}
}

func approve(t *testing.T, s Store, id string, now time.Time) *queue.Action {
	t.Helper()
	return transition(t, s, approveParams(id, "user:ann@example.com", now))
}

func executeParams(id string, now, deadline time.Time) queue.ActionTransitionParams {
	return queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StateApproved}, To: queue.StateInProgress, Now: now,
		ClaimedAt: ptr(now), ClaimedBy: ptr(agent), ClaimDeadline: ptr(deadline),
		Event: queue.Event{Kind: queue.EventClaimed, Actor: agent, At: now}}
}

func completeParams(id string, now time.Time, result string) queue.ActionTransitionParams {
	return queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StateInProgress}, To: queue.StateDone, Now: now,
		Result: json.RawMessage(result), FinishedAt: ptr(now),
		Event: queue.Event{Kind: queue.EventCompleted, Actor: agent, At: now, Data: json.RawMessage(result)}}
}

func failParams(id string, now time.Time, why string) queue.ActionTransitionParams {
	return queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StateInProgress}, To: queue.StateFailed, Now: now,
		Error: ptr(why), FinishedAt: ptr(now),
		Event: queue.Event{Kind: queue.EventFailed, Actor: agent, At: now}}
}

// recordOutcomeParams is the transition that records the outcome of an
// at-least-once call made through an upstream: recorded to done with the
// upstream's CallToolResult, or to failed with its text (and the result
// kept).
func recordOutcomeParams(id string, to queue.State, now time.Time) queue.ActionTransitionParams {
	p := queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StateRecorded}, To: to, Now: now, FinishedAt: ptr(now),
		Result: json.RawMessage(`{"content":[{"type":"text","text":"found"}],"isError":false}`),
		Event:  queue.Event{Kind: queue.EventCompleted, Actor: queue.DispatcherActor, Channel: queue.UpstreamChannel, At: now}}
	if to == queue.StateFailed {
		p.Result = json.RawMessage(`{"content":[{"type":"text","text":"not found"}],"isError":true}`)
		p.Error = ptr("not found")
		p.Event.Kind = queue.EventFailed
	}
	return p
}

func cancelParams(id string, now time.Time) queue.ActionTransitionParams {
	return queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StatePending, queue.StateApproved},
		To: queue.StateCancelled, Now: now, DecidedBy: ptr(agent), FinishedAt: ptr(now),
		Event: queue.Event{Kind: queue.EventCancelled, Actor: agent, At: now}}
}

func rejectParams(id, by string, now time.Time) queue.ActionTransitionParams {
	return queue.ActionTransitionParams{ID: id, From: []queue.State{queue.StatePending}, To: queue.StateRejected, Now: now,
		DecidedBy: ptr(by), DecidedAt: ptr(now), DecisionNote: ptr("not this customer"),
		Event: queue.Event{Kind: queue.EventRejected, Actor: by, At: now}}
}

func expireParams(id string, from queue.State, now time.Time) queue.ActionTransitionParams {
	return queue.ActionTransitionParams{ID: id, From: []queue.State{from}, To: queue.StateExpired, Now: now,
		FinishedAt: ptr(now), Event: queue.Event{Kind: queue.EventExpired, Actor: "system", At: now}}
}

func get(t *testing.T, s Store, id string) *queue.Action {
	t.Helper()
	a, err := s.ActionGetByID(t.Context(), id)
	noErr(t, err, "get action "+id)
	return a
}

func events(t *testing.T, s Store, actionID string) []queue.Event {
	t.Helper()
	evs, err := s.EventList(t.Context(), queue.EventListParams{ActionID: actionID, Limit: 1000})
	noErr(t, err, "list events")
	return evs
}

// eventKinds lists an action's event kinds oldest first.
func eventKinds(t *testing.T, s Store, actionID string) []string {
	t.Helper()
	evs := events(t, s, actionID)
	kinds := make([]string, len(evs))
	for i, ev := range evs {
		kinds[len(evs)-1-i] = ev.Kind
	}
	return kinds
}

func countKind(kinds []string, kind string) int {
	n := 0
	for _, k := range kinds {
		if k == kind {
			n++
		}
	}
	return n
}

// Assertions that stop the test, in the manner of require.

func noErr(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}

func isErr(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want one matching %v", what, err, target)
	}
}

func eq[T comparable](t testing.TB, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func timeEq(t testing.TB, got, want time.Time, what string) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s: got %s, want %s", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
}

func timePtrEq(t testing.TB, got, want *time.Time, what string) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Fatalf("%s: got %v, want %v", what, got, want)
	default:
		timeEq(t, *got, *want, what)
	}
}

func strPtrEq(t testing.TB, got, want *string, what string) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Fatalf("%s: got %s, want %s", what, show(got), show(want))
	default:
		eq(t, *got, *want, what)
	}
}

func show(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}

// jsonEq compares JSON documents as values: key order and spacing do not
// matter (PostgreSQL's jsonb normalises them).
func jsonEq(t testing.TB, got, want []byte, what string) {
	t.Helper()
	if !queue.JSONEqual(got, want) {
		t.Fatalf("%s: got %s, want %s", what, got, want)
	}
}

// ids returns the ids of list in order.
func ids(list []*queue.Action) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.ID
	}
	return out
}

func sliceEq[T comparable](t testing.TB, got, want []T, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d items %v, want %d items %v", what, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: item %d: got %v, want %v (got %v, want %v)", what, i, got[i], want[i], got, want)
		}
	}
}

func errorsIsNotFound(err error) bool { return queue.ErrorCode(err) == queue.CodeNotFound }
