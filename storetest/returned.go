package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// sameAsStored fails the test unless got, an action a write returned, is
// deeply equal to a fresh read of it: every field, nil against empty
// included (they encode differently), the ticket and the time zones.
func sameAsStored(t *testing.T, s Store, what string, got *queue.Action) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no action returned", what)
	}
	stored := get(t, s, got.ID)
	if reflect.DeepEqual(got, stored) {
		return
	}
	var diff []string
	g, w := reflect.ValueOf(got).Elem(), reflect.ValueOf(stored).Elem()
	for i := range g.NumField() {
		if gf, wf := g.Field(i).Interface(), w.Field(i).Interface(); !reflect.DeepEqual(gf, wf) {
			diff = append(diff, fmt.Sprintf("%s: returned %s, stored %s", g.Type().Field(i).Name, showValue(gf), showValue(wf)))
		}
	}
	t.Fatalf("%s: the returned action is not the stored one:\n%s", what, strings.Join(diff, "\n"))
}

// showValue prints v with its pointers followed, nil and empty told apart.
func showValue(v any) string {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "nil"
		}
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Slice && rv.IsNil() {
		return "nil slice"
	}
	if tm, ok := rv.Interface().(time.Time); ok {
		return fmt.Sprintf("%s (%s)", tm.Format(time.RFC3339Nano), tm.Location())
	}
	if b, ok := rv.Interface().([]byte); ok {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%+v", rv.Interface())
}

// What ActionSubmit and ActionTransition return is what a fresh read
// returns, for new submissions and replays of each class, for transitions
// with and without a ticket, and for a refused transition.
var returnedTests = []test{
	{"Submissions", func(t *testing.T, s Store) {
		for i, class := range []classify.Class{classify.AtMostOnce, classify.ExactlyOnce, classify.AtLeastOnce} {
			key := "returned:" + string(class)
			now := at(time.Duration(i) * time.Minute)
			a := newAction(class, "tool_"+strings.ReplaceAll(string(class), "-", "_"), key, now)
			a.Warnings = []string{"intent_key_looks_random"}
			res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a)})
			got, created := res.Holder, res.Created
			noErr(t, err, string(class)+": submit")
			eq(t, created, true, string(class)+": created")
			sameAsStored(t, s, string(class)+": new submission", got)

			// No warnings: stored as [] and read back as such.
			again := newAction(class, a.Tool, key, now.Add(time.Second))
			res, err = s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: again, Event: submittedEvent(again)})
			got, created = res.Holder, res.Created
			noErr(t, err, string(class)+": submit again")
			// At-least-once holds no intent: the second is a new record.
			eq(t, created, class == classify.AtLeastOnce, string(class)+": second submission created")
			if !created {
				eq(t, got.ID, a.ID, string(class)+": holder")
			}
			sameAsStored(t, s, string(class)+": second submission", got)
		}
	}},
	{"ReplayWithTicket", func(t *testing.T, s Store) {
		a, tk := staleTicket(t, s, "returned:stale")
		again := newAction(classify.ExactlyOnce, a.Tool, a.IntentKey, at(11*time.Minute))
		res, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: again, Event: submittedEvent(again)})
		got, created := res.Holder, res.Created
		noErr(t, err, "replay")
		eq(t, created, false, "created")
		wantTicket(t, got, tk.ID, queue.TicketOpen)
		sameAsStored(t, s, "replay of a holder with a stale ticket", got)

		// A late report resolves the ticket in the same transaction.
		p := completeParams(a.ID, at(12*time.Minute), `{"ok":true}`)
		p.ResolveStale = queue.LateResolution(p.Event, p.To, queue.LateReportNote)
		done := transition(t, s, p)
		wantTicket(t, done, tk.ID, queue.TicketResolved)
		sameAsStored(t, s, "late completion resolving the stale ticket", done)
	}},
	{"Transitions", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "returned:approve", at(0))
		approved := approve(t, s, a.ID, at(time.Minute))
		sameAsStored(t, s, "approve", approved)

		// Refused: the action as it is, beside ErrStateMismatch.
		refused, err := s.ActionTransition(t.Context(), approveParams(a.ID, "user:bob@example.com", at(2*time.Minute)))
		if !errors.Is(err, queue.ErrStateMismatch) {
			t.Fatalf("approve twice: got %v, want ErrStateMismatch", err)
		}
		sameAsStored(t, s, "refused approval", refused)

		running := transition(t, s, executeParams(a.ID, at(3*time.Minute), at(8*time.Minute)))
		sameAsStored(t, s, "execute", running)
		failed := transition(t, s, failParams(a.ID, at(4*time.Minute), "upstream said no"))
		sameAsStored(t, s, "fail", failed)

		r := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "returned:reject", at(0))
		sameAsStored(t, s, "reject", transition(t, s, rejectParams(r.ID, "user:ann@example.com", at(time.Minute))))
		c := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "returned:cancel", at(0))
		sameAsStored(t, s, "cancel", transition(t, s, cancelParams(c.ID, at(time.Minute))))
		x := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "returned:complete", at(0))
		sameAsStored(t, s, "complete", transition(t, s, completeParams(x.ID, at(time.Minute), `{"refund_id":"r-1"}`)))
	}},
}
