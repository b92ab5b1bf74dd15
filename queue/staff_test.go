package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

const idpTools = `
groups:
  leads: [ann@example.com, "idp:support-leads"]
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    approval:
      approvers: [leads]
`

// An "idp:" member of an approver group lets everyone in that identity
// provider group decide, as of their last sign-in: the Service learns the
// groups from the accounts (queue.StaffDirectory), so every way of deciding
// (one decision, bulk, "waiting for me") counts them, and a person the
// provider refused decides nothing.
func TestIdPGroupsDecide(t *testing.T) {
	t.Parallel()
	opts := apptest.EnvOptions{Tools: apptest.ParseTools(t, idpTools, classify.Options{}),
		Clock: testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))}
	apptest.OnBothStores(t, opts, func(t *testing.T, e *apptest.Env) {
		ctx, svc := t.Context(), e.Service
		signIn := func(email string, groups ...string) {
			t.Helper()
			if _, err := e.Store.UserSSOSignIn(ctx, accounts.UserSSOSignInParams{Email: email, Subject: "sub-" + email,
				Role: accounts.RoleApprover, IdPGroups: groups, Now: e.Clock.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		signIn("zoe@example.com", "staff", "support-leads") // in the IdP group
		signIn("yan@example.com", "staff")                  // not in it
		signIn("xia@example.com", "support-leads")          // in it, but refused below
		if _, err := e.Store.UserSSODeny(ctx, accounts.UserSSODenyParams{Email: "xia@example.com", Subject: "sub-xia",
			IdPGroups: []string{"support-leads"}, Now: e.Clock.Now()}); err != nil {
			t.Fatal(err)
		}

		one := submitPending(t, svc, "send_customer_email", "one")
		two := submitPending(t, svc, "send_customer_email", "two")
		three := submitPending(t, svc, "send_customer_email", "three")

		// Waiting for me counts the IdP group.
		for by, want := range map[string]int{"user:zoe@example.com": 3, "user:yan@example.com": 0, "user:xia@example.com": 0, "user:ann@example.com": 3} {
			list, _, err := svc.List(ctx, queue.ListRequest{WaitingFor: by, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != want {
				t.Errorf("waiting for %s: %d actions, want %d", by, len(list), want)
			}
		}
		for by, want := range map[string]bool{"user:zoe@example.com": true, "user:yan@example.com": false, "user:xia@example.com": false} {
			d, err := svc.Staff().Decider(ctx, by)
			if got := one.MayDecide(d); err != nil || got != want {
				t.Errorf("MayDecide(%s) = %v, %v; want %v", by, got, err, want)
			}
		}

		// Outside the group, or refused by the provider: forbidden, nothing changes.
		for _, by := range []string{"user:yan@example.com", "user:xia@example.com"} {
			if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: one.ID, By: by}); queue.ErrorCode(err) != queue.CodeForbidden {
				t.Fatalf("approval by %s: %v, want forbidden", by, err)
			}
			if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateRejected, ID: one.ID, By: by, Note: "no"}); queue.ErrorCode(err) != queue.CodeForbidden {
				t.Fatalf("rejection by %s: %v, want forbidden", by, err)
			}
		}
		got, err := e.Store.ActionGetByID(ctx, one.ID)
		if err != nil || got.State != queue.StatePending {
			t.Fatalf("after refused decisions: %v %v", got.State, err)
		}
		// In the group: the decision counts.
		res, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: one.ID, By: "user:zoe@example.com"})
		if err != nil || res.Action.State != queue.StateApproved {
			t.Fatalf("approval by the IdP group's member: %v %+v", err, res.Action)
		}
		// Bulk decides through the same rule.
		out, err := svc.Bulk(ctx, queue.BulkRequest{IDs: []string{two.ID}, Decision: "approve", By: "user:yan@example.com"})
		if err != nil || out[0].Outcome != queue.BulkNotAllowed {
			t.Fatalf("bulk by a non-member: %v %+v", err, out)
		}
		out, err = svc.Bulk(ctx, queue.BulkRequest{IDs: []string{two.ID, three.ID}, Decision: "reject", Note: "no", By: "user:zoe@example.com"})
		if err != nil || out[0].Outcome != queue.BulkDecided || out[1].Outcome != queue.BulkDecided {
			t.Fatalf("bulk by the IdP group's member: %v %+v", err, out)
		}

		// The groups are those of the last sign-in: out of the group now,
		// zoe decides nothing more.
		signIn("zoe@example.com", "staff")
		four := submitPending(t, svc, "send_customer_email", "four")
		if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: four.ID, By: "user:zoe@example.com"}); queue.ErrorCode(err) != queue.CodeForbidden {
			t.Fatalf("approval after leaving the IdP group: %v, want forbidden", err)
		}
	})
}

// Staff().Record writes an event of no action at the service clock's
// time, with what was typed kept visible (a control character or a byte
// that is not UTF-8 becomes U+FFFD, which every store keeps), and refuses
// an event without a kind or an actor; on both stores.
func TestRecordStaffEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 3, 14, 9, 26, 53, 0, time.UTC)
	apptest.OnBothStores(t, apptest.EnvOptions{Clock: testclock.At(at)}, func(t *testing.T, e *apptest.Env) {
		ctx := context.Background()
		if err := e.Service.Staff().Record(ctx, queue.StaffEvent{Kind: queue.EventSignInRefused, Actor: queue.ActorAnonymous,
			Subject: queue.UserSubject("eve\x00\x1b\xff@example.com"), Channel: "password",
			Data: map[string]any{"reason": "bad_credentials"}}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []queue.StaffEvent{{Actor: "user:a@example.com"}, {Kind: queue.EventSignedIn}} {
			if err := e.Service.Staff().Record(ctx, bad); err == nil {
				t.Errorf("%+v was recorded", bad)
			}
		}
		evs, err := e.Store.EventList(ctx, queue.EventListParams{Limit: 10})
		if err != nil || len(evs) != 1 {
			t.Fatalf("events: %+v, %v", evs, err)
		}
		ev := evs[0]
		if ev.ActionID != "" || ev.Subject != "user:eve\uFFFD\uFFFD\uFFFD@example.com" || ev.Kind != queue.EventSignInRefused ||
			ev.Actor != "anonymous" || ev.Channel != "password" || !ev.At.Equal(at) || string(ev.Data) != `{"reason":"bad_credentials"}` {
			t.Fatalf("staff event %+v", ev)
		}
	})
}
