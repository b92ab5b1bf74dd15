package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// ssoSignIn records a single sign-on of email with role and groups.
func ssoSignIn(t *testing.T, s Store, email string, role accounts.Role, groups []string, now time.Time) accounts.UserSSOSignInResult {
	t.Helper()
	res, err := s.UserSSOSignIn(t.Context(), accounts.UserSSOSignInParams{Email: email, Subject: "sub-" + email,
		Role: role, IdPGroups: groups, Now: now})
	noErr(t, err, "single sign-on of "+email)
	return res
}

// ssoTests pin the single sign-on half of accounts.Store (docs/sso.md):
// users made and refreshed by sign-ins, denials that end sessions,
// and sign-in states used once.
var ssoTests = []test{
	{"SignInCreatesThenRefreshes", func(t *testing.T, s Store) {
		first := ssoSignIn(t, s, "Ann@Example.com", accounts.RoleApprover, []string{"support", "staff"}, at(0))
		eq(t, first.Created, true, "first sign-in creates the user")
		u := first.User
		eq(t, u.Email, "Ann@Example.com", "email")
		eq(t, u.PasswordHash, "", "an SSO user has no password")
		eq(t, u.Role, accounts.RoleApprover, "role")
		eq(t, u.SSOSubject, "sub-Ann@Example.com", "subject")
		eq(t, slices.Equal(u.IdPGroups, []string{"support", "staff"}), true, "groups in the provider's order")
		timeEq(t, *u.IdPSyncedAt, at(0), "groups synced at")
		eq(t, u.SSODeniedAt == nil, true, "not denied")
		eq(t, slices.Equal(u.SignsInWith(), []string{"SSO"}), true, "signs in with SSO only")

		// The next sign-in (any case of the email) is the same user with the
		// role and groups of now.
		again := ssoSignIn(t, s, "ann@example.com", accounts.RoleAdmin, []string{"admins"}, at(time.Hour))
		eq(t, again.Created, false, "second sign-in creates nobody")
		eq(t, again.User.ID, u.ID, "same user")
		eq(t, again.User.Role, accounts.RoleAdmin, "role refreshed")
		eq(t, slices.Equal(again.User.IdPGroups, []string{"admins"}), true, "groups refreshed")
		timeEq(t, *again.User.IdPSyncedAt, at(time.Hour), "groups synced again")
		timeEq(t, again.User.CreatedAt, at(0), "created at kept")
		got, err := s.UserGetByID(t.Context(), u.ID)
		noErr(t, err, "read back")
		eq(t, slices.Equal(got.IdPGroups, []string{"admins"}), true, "groups read back")
		eq(t, got.Role, accounts.RoleAdmin, "role read back")

		// No groups is an empty list, never nil trouble.
		none := ssoSignIn(t, s, "ann@example.com", accounts.RoleViewer, nil, at(2*time.Hour))
		eq(t, len(none.User.IdPGroups), 0, "no groups")

		// A password user who signs in with SSO keeps the password; the
		// provider's role wins.
		bob := createUser(t, s, "bob@example.com", accounts.RoleAdmin, at(0))
		saveSession(t, s, "s-bob", bob.ID, at(0))
		res := ssoSignIn(t, s, "bob@example.com", accounts.RoleViewer, []string{"staff"}, at(time.Hour))
		eq(t, res.Created, false, "linked, not created")
		eq(t, res.User.ID, bob.ID, "same user")
		eq(t, res.User.PasswordHash, "hash-of-bob@example.com", "password kept")
		eq(t, res.User.Role, accounts.RoleViewer, "the provider's role")
		eq(t, slices.Equal(res.User.SignsInWith(), []string{"SSO", "password"}), true, "signs in both ways")
		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-bob", Now: at(time.Hour)})
		noErr(t, err, "a sign-in elsewhere ends no session")
	}},
	{"ConcurrentFirstSignInsCreateOneUser", func(t *testing.T, s Store) {
		const n = 20
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make([]accounts.UserSSOSignInResult, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				results[i], errs[i] = s.UserSSOSignIn(context.Background(), accounts.UserSSOSignInParams{Email: "cara@example.com",
					Subject: "sub-cara", Role: accounts.RoleApprover, IdPGroups: []string{"support"}, Now: at(time.Duration(i) * time.Second)})
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for i := range n {
			noErr(t, errs[i], "concurrent sign-in")
			if results[i].Created {
				created++
			}
			eq(t, results[i].User.ID, results[0].User.ID, "one user")
		}
		eq(t, created, 1, "sign-ins that created the user")
		count, err := s.UserCount(t.Context())
		noErr(t, err, "count")
		eq(t, count, 1, "users")
	}},
	{"DenyEndsSessions", func(t *testing.T, s Store) {
		_, err := s.UserSSODeny(t.Context(), accounts.UserSSODenyParams{Email: "nobody@example.com", Subject: "x", Now: at(0)})
		isErr(t, err, accounts.ErrNotFound, "deny an unknown email")
		count, err := s.UserCount(t.Context())
		noErr(t, err, "count")
		eq(t, count, 0, "a denial creates nobody")

		ann := ssoSignIn(t, s, "ann@example.com", accounts.RoleApprover, []string{"support"}, at(0)).User
		bob := createUser(t, s, "bob@example.com", accounts.RoleApprover, at(0))
		saveSession(t, s, "s-ann-1", ann.ID, at(0))
		saveSession(t, s, "s-ann-2", ann.ID, at(0))
		saveSession(t, s, "s-bob", bob.ID, at(0))
		u, err := s.UserSSODeny(t.Context(), accounts.UserSSODenyParams{Email: "ANN@example.com", Subject: "sub-ann",
			IdPGroups: []string{"former-staff"}, Now: at(time.Hour)})
		noErr(t, err, "deny ann")
		eq(t, u.ID, ann.ID, "denied user")
		timeEq(t, *u.SSODeniedAt, at(time.Hour), "denied at")
		eq(t, slices.Equal(u.IdPGroups, []string{"former-staff"}), true, "the groups that map to no role are kept")
		eq(t, u.Role, accounts.RoleApprover, "the role is left as it was")
		for _, id := range []string{"s-ann-1", "s-ann-2"} {
			_, err := s.SessionGet(t.Context(), accounts.SessionGetParams{ID: id, Now: at(time.Hour)})
			isErr(t, err, accounts.ErrNotFound, "ann's session "+id+" after the denial")
		}
		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-bob", Now: at(time.Hour)})
		noErr(t, err, "another user's session")

		// A successful sign-in lifts the denial, and so does an admin's update.
		back := ssoSignIn(t, s, "ann@example.com", accounts.RoleViewer, []string{"staff"}, at(2*time.Hour))
		eq(t, back.User.SSODeniedAt == nil, true, "sign-in lifts the denial")
		_, err = s.UserSSODeny(t.Context(), accounts.UserSSODenyParams{Email: "bob@example.com", Subject: "sub-bob", Now: at(time.Hour)})
		noErr(t, err, "deny bob")
		noErr(t, s.UserUpdate(t.Context(), accounts.UserUpdateParams{ID: bob.ID, PasswordHash: "h2", Role: accounts.RoleAdmin, Now: at(2 * time.Hour)}), "update bob")
		got, err := s.UserGetByID(t.Context(), bob.ID)
		noErr(t, err, "read bob")
		eq(t, got.SSODeniedAt == nil, true, "an admin's update lifts the denial")
	}},
	{"SessionSetData", func(t *testing.T, s Store) {
		ann := createUser(t, s, "ann@example.com", accounts.RoleApprover, at(0))
		saveSession(t, s, "s-ann", ann.ID, at(0))
		noErr(t, s.SessionSetData(t.Context(), accounts.SessionSetDataParams{ID: "s-ann", Data: `{"sso_checked":"later"}`}), "set data")
		got, err := s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-ann", Now: at(time.Hour)})
		noErr(t, err, "read back")
		eq(t, got.Data, `{"sso_checked":"later"}`, "data")
		eq(t, got.UserID, ann.ID, "user kept")
		timeEq(t, got.ExpiresAt, at(24*time.Hour), "expiry kept")
		// A session gone meanwhile (a logout) stays gone.
		noErr(t, s.SessionDelete(t.Context(), "s-ann"), "delete")
		isErr(t, s.SessionSetData(t.Context(), accounts.SessionSetDataParams{ID: "s-ann", Data: "{}"}), accounts.ErrNotFound, "set data of a deleted session")
		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-ann", Now: at(time.Hour)})
		isErr(t, err, accounts.ErrNotFound, "the deleted session after set data")
	}},
	{"StateUsedOnce", func(t *testing.T, s Store) {
		p := accounts.SSOStateUseParams{Hash: "h-1", ExpiresAt: at(10 * time.Minute)}
		noErr(t, s.SSOStateUse(t.Context(), p), "first use")
		isErr(t, s.SSOStateUse(t.Context(), p), accounts.ErrStateUsed, "second use")

		const n = 20
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = s.SSOStateUse(context.Background(), accounts.SSOStateUseParams{Hash: "h-2", ExpiresAt: at(10 * time.Minute)})
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, accounts.ErrStateUsed):
				t.Fatalf("concurrent use: %v", err)
			}
		}
		eq(t, won, 1, "concurrent uses that won")

		// Pruned once expired (its cookie is refused by then anyway).
		noErr(t, s.AccountsPrune(t.Context(), accounts.AccountsPruneParams{Now: at(10 * time.Minute), FailuresBefore: at(0)}), "prune")
		noErr(t, s.SSOStateUse(t.Context(), p), "a pruned state's record is gone")
	}},
	{"StaffEvents", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "staff:1", at(0))
		noErr(t, s.StaffEventInsert(t.Context(), queue.Event{Kind: queue.EventSignedIn, Actor: "user:ann@example.com", Channel: "sso",
			At: at(time.Minute), Data: json.RawMessage(`{"role":"approver"}`)}), "insert a sign-in")
		noErr(t, s.StaffEventInsert(t.Context(), queue.Event{Kind: queue.EventSignInRefused, Actor: "anonymous", Channel: "sso",
			At: at(2 * time.Minute)}), "insert a refusal without data")
		list, err := s.EventList(t.Context(), queue.EventListParams{Limit: 10})
		noErr(t, err, "list")
		eq(t, len(list), 3, "events: the submission and two staff events")
		eq(t, list[0].Kind, queue.EventSignInRefused, "newest")
		eq(t, list[0].ActionID, "", "a staff event has no action")
		eq(t, len(list[0].Data), 0, "no data")
		eq(t, list[1].Actor, "user:ann@example.com", "actor")
		eq(t, list[1].Channel, "sso", "channel")
		timeEq(t, list[1].At, at(time.Minute), "at")
		jsonEq(t, list[1].Data, []byte(`{"role":"approver"}`), "data")
		byKind, err := s.EventList(t.Context(), queue.EventListParams{Kind: queue.EventSignedIn, Limit: 10})
		noErr(t, err, "by kind")
		eq(t, len(byKind), 1, "sign-ins")
		eq(t, len(events(t, s, a.ID)), 1, "the action's timeline holds only its own event")
		// They tell no channel.
		routed := 0
		_, err = s.NotificationFanOut(t.Context(), queue.NotificationFanOutParams{Now: at(time.Hour), Limit: 100,
			Route: func(ev queue.Event, _ *queue.Action, _ []queue.ChannelMessage) []queue.NotificationRecord {
				if ev.ActionID == "" {
					routed++
				}
				return nil
			}})
		noErr(t, err, "fan out")
		eq(t, routed, 0, "staff events offered to the outbox")
	}},
	{"EligibleByIdPGroup", func(t *testing.T, s Store) {
		a := quorumAction("idp:1", 1, []string{"ann@example.com"}, nil, at(0))
		a.Spec.Approval.ApproverIdPGroups = []string{"support-leads"}
		a = submit(t, s, a)
		// In no listed group, or refused by the provider: nothing changes.
		for _, p := range []queue.ActionDecideParams{
			withGroups(decideParams(a.ID, queue.StateApproved, "user:zoe@example.com", at(time.Minute)), []string{"staff"}, false),
			withGroups(decideParams(a.ID, queue.StateApproved, "user:zoe@example.com", at(time.Minute)), []string{"support-leads"}, true),
		} {
			_, err := s.ActionDecide(t.Context(), p)
			var qe *queue.Error
			if !errors.As(err, &qe) || qe.Code != queue.CodeForbidden {
				t.Fatalf("decide as %s in %v (no access %v): %v, want forbidden", p.By, p.IdPGroups, p.NoAccess, err)
			}
			eq(t, get(t, s, a.ID).State, queue.StatePending, "state after a refused decision")
		}
		res, err := s.ActionDecide(t.Context(), withGroups(decideParams(a.ID, queue.StateApproved, "user:zoe@example.com", at(2*time.Minute)),
			[]string{"staff", "support-leads"}, false))
		noErr(t, err, "decide as a member of the idp group")
		eq(t, res.Action.State, queue.StateApproved, "approved by the idp group's member")
		eq(t, *res.Action.DecidedBy, "user:zoe@example.com", "decided by")
	}},
}

func withGroups(p queue.ActionDecideParams, groups []string, noAccess bool) queue.ActionDecideParams {
	p.IdPGroups, p.NoAccess = groups, noAccess
	return p
}
