package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
)

func createUser(t *testing.T, s Store, email string, role accounts.Role, now time.Time) *accounts.User {
	t.Helper()
	u, err := s.UserCreate(t.Context(), &accounts.User{Email: email, PasswordHash: "hash-of-" + email, Role: role,
		CreatedAt: now, PasswordChangedAt: now})
	noErr(t, err, "create user "+email)
	return u
}

func saveSession(t *testing.T, s Store, id string, userID int64, now time.Time) {
	t.Helper()
	noErr(t, s.SessionSave(t.Context(), &accounts.Session{ID: id, UserID: userID, Data: "csrf=x", CreatedAt: now,
		ExpiresAt: now.Add(24 * time.Hour)}), "save session "+id)
}

var accountTests = []test{
	{"Users", func(t *testing.T, s Store) {
		n, err := s.UserCount(t.Context())
		noErr(t, err, "count")
		eq(t, n, 0, "users in an empty store")
		ann := createUser(t, s, "ann@example.com", accounts.RoleAdmin, at(0))
		if ann.ID == 0 {
			t.Fatal("created user has no id")
		}
		eq(t, ann.Email, "ann@example.com", "email")
		eq(t, ann.Role, accounts.RoleAdmin, "role")
		eq(t, ann.PasswordHash, "hash-of-ann@example.com", "hash")
		timeEq(t, ann.CreatedAt, at(0), "created at")
		timeEq(t, ann.PasswordChangedAt, at(0), "password changed at")

		_, err = s.UserCreate(t.Context(), &accounts.User{Email: "ANN@Example.com", PasswordHash: "x", Role: accounts.RoleViewer,
			CreatedAt: at(time.Minute), PasswordChangedAt: at(time.Minute)})
		isErr(t, err, accounts.ErrExists, "email taken in another case")

		bob := createUser(t, s, "bob@example.com", accounts.RoleApprover, at(time.Minute))
		got, err := s.UserGetByEmail(t.Context(), "Ann@EXAMPLE.com")
		noErr(t, err, "get by email in another case")
		eq(t, got.ID, ann.ID, "found by email")
		got, err = s.UserGetByID(t.Context(), bob.ID)
		noErr(t, err, "get by id")
		eq(t, got.Email, "bob@example.com", "found by id")
		_, err = s.UserGetByEmail(t.Context(), "nobody@example.com")
		isErr(t, err, accounts.ErrNotFound, "unknown email")
		_, err = s.UserGetByID(t.Context(), bob.ID+1000)
		isErr(t, err, accounts.ErrNotFound, "unknown id")

		list, err := s.UserList(t.Context())
		noErr(t, err, "list")
		eq(t, len(list), 2, "users listed")
		n, err = s.UserCount(t.Context())
		noErr(t, err, "count")
		eq(t, n, 2, "users counted")

		noErr(t, s.UserSetRole(t.Context(), accounts.UserSetRoleParams{ID: bob.ID, Role: accounts.RoleOps}), "set role")
		got, err = s.UserGetByID(t.Context(), bob.ID)
		noErr(t, err, "get after role change")
		eq(t, got.Role, accounts.RoleOps, "new role")
		isErr(t, s.UserSetRole(t.Context(), accounts.UserSetRoleParams{ID: bob.ID + 1000, Role: accounts.RoleOps}), accounts.ErrNotFound, "set role of an unknown user")

		// A password change ends the user's sessions, and only theirs.
		saveSession(t, s, "s-ann", ann.ID, at(0))
		saveSession(t, s, "s-bob", bob.ID, at(0))
		noErr(t, s.UserSetPassword(t.Context(), accounts.UserSetPasswordParams{ID: ann.ID, PasswordHash: "new-hash", Now: at(time.Hour)}), "set password")
		got, err = s.UserGetByID(t.Context(), ann.ID)
		noErr(t, err, "get after password change")
		eq(t, got.PasswordHash, "new-hash", "new hash")
		timeEq(t, got.PasswordChangedAt, at(time.Hour), "password changed at")
		timeEq(t, got.CreatedAt, at(0), "created at kept")
		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-ann", Now: at(time.Hour)})
		isErr(t, err, accounts.ErrNotFound, "session after password change")
		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-bob", Now: at(time.Hour)})
		noErr(t, err, "another user's session")
		isErr(t, s.UserSetPassword(t.Context(), accounts.UserSetPasswordParams{ID: bob.ID + 1000, PasswordHash: "h", Now: at(time.Hour)}), accounts.ErrNotFound,
			"set password of an unknown user")

		// Removal ends the sessions too.
		noErr(t, s.UserDelete(t.Context(), bob.ID), "delete")
		_, err = s.UserGetByID(t.Context(), bob.ID)
		isErr(t, err, accounts.ErrNotFound, "deleted user")
		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-bob", Now: at(time.Hour)})
		isErr(t, err, accounts.ErrNotFound, "session of a deleted user")
		isErr(t, s.UserDelete(t.Context(), bob.ID), accounts.ErrNotFound, "delete twice")
		n, err = s.UserCount(t.Context())
		noErr(t, err, "count")
		eq(t, n, 1, "users after delete")
		// The email is free again.
		createUser(t, s, "Bob@example.com", accounts.RoleViewer, at(2*time.Hour))
	}},
	{"UserUpdate", func(t *testing.T, s Store) {
		ctx := t.Context()
		ann := createUser(t, s, "ann@example.com", accounts.RoleApprover, at(0))
		bob := createUser(t, s, "bob@example.com", accounts.RoleViewer, at(0))
		noErr(t, s.UserSetSlackID(ctx, accounts.UserSetSlackIDParams{ID: ann.ID, SlackID: "U1"}), "set ann's Slack id")
		noErr(t, s.UserSetSlackID(ctx, accounts.UserSetSlackIDParams{ID: bob.ID, SlackID: "U2"}), "set bob's Slack id")
		saveSession(t, s, "s-bob", bob.ID, at(0))
		// A Slack id another user has: nothing changes, not the password,
		// the role or the sessions.
		if err := s.UserUpdate(ctx, accounts.UserUpdateParams{ID: bob.ID, PasswordHash: "new-hash", Role: accounts.RoleAdmin, SlackID: "U1", Now: at(time.Minute)}); !errors.Is(err, accounts.ErrSlackIDTaken) {
			t.Fatalf("update bob with ann's Slack id: %v, want ErrSlackIDTaken", err)
		}
		u, err := s.UserGetByID(ctx, bob.ID)
		noErr(t, err, "get bob")
		eq(t, u.PasswordHash, "hash-of-bob@example.com", "password after a refused update")
		eq(t, u.Role, accounts.RoleViewer, "role after a refused update")
		eq(t, u.SlackID, "U2", "Slack id after a refused update")
		_, err = s.SessionGet(ctx, accounts.SessionGetParams{ID: "s-bob", Now: at(time.Minute)})
		noErr(t, err, "bob's session after a refused update")
		// No Slack id keeps the one set; every other field changes, and the
		// sessions end.
		noErr(t, s.UserUpdate(ctx, accounts.UserUpdateParams{ID: bob.ID, PasswordHash: "new-hash", Role: accounts.RoleAdmin, SlackID: "", Now: at(time.Minute)}), "update bob")
		u, err = s.UserGetByID(ctx, bob.ID)
		noErr(t, err, "get bob")
		eq(t, u.PasswordHash, "new-hash", "password after the update")
		eq(t, u.Role, accounts.RoleAdmin, "role after the update")
		eq(t, u.SlackID, "U2", "Slack id kept")
		eq(t, u.PasswordChangedAt.Equal(at(time.Minute)), true, "password_changed_at is the update's time")
		if _, err := s.SessionGet(ctx, accounts.SessionGetParams{ID: "s-bob", Now: at(time.Minute)}); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("bob's session after a password change: %v, want ErrNotFound", err)
		}
		noErr(t, s.UserUpdate(ctx, accounts.UserUpdateParams{ID: bob.ID, PasswordHash: "newer-hash", Role: accounts.RoleAdmin, SlackID: "U3", Now: at(time.Minute)}), "update bob's Slack id")
		u, err = s.UserGetByID(ctx, bob.ID)
		noErr(t, err, "get bob")
		eq(t, u.SlackID, "U3", "new Slack id")
		if err := s.UserUpdate(ctx, accounts.UserUpdateParams{ID: 999999, PasswordHash: "x", Role: accounts.RoleAdmin, SlackID: "", Now: at(0)}); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("update an unknown user: %v, want ErrNotFound", err)
		}
	}},
	{"Tokens", func(t *testing.T, s Store) {
		tok, err := s.TokenCreate(t.Context(), accounts.TokenCreateParams{Name: "billing-bot", Hash: "hash-1", Now: at(0)})
		noErr(t, err, "create")
		eq(t, tok.Name, "billing-bot", "name")
		timeEq(t, tok.CreatedAt, at(0), "created at")
		timePtrEq(t, tok.RevokedAt, nil, "revoked at")
		_, err = s.TokenCreate(t.Context(), accounts.TokenCreateParams{Name: "billing-bot", Hash: "hash-2", Now: at(time.Minute)})
		isErr(t, err, accounts.ErrExists, "active name taken")

		got, err := s.TokenGetByHash(t.Context(), "hash-1")
		noErr(t, err, "get by hash")
		eq(t, got.ID, tok.ID, "found")
		eq(t, got.Name, "billing-bot", "found name")
		_, err = s.TokenGetByHash(t.Context(), "hash-unknown")
		isErr(t, err, accounts.ErrNotFound, "unknown hash")

		noErr(t, s.TokenRevoke(t.Context(), accounts.TokenRevokeParams{Name: "billing-bot", Now: at(time.Hour)}), "revoke")
		_, err = s.TokenGetByHash(t.Context(), "hash-1")
		isErr(t, err, accounts.ErrNotFound, "revoked token")
		isErr(t, s.TokenRevoke(t.Context(), accounts.TokenRevokeParams{Name: "billing-bot", Now: at(2 * time.Hour)}), accounts.ErrNotFound, "revoke twice")
		isErr(t, s.TokenRevoke(t.Context(), accounts.TokenRevokeParams{Name: "nobody", Now: at(2 * time.Hour)}), accounts.ErrNotFound, "revoke unknown")

		again, err := s.TokenCreate(t.Context(), accounts.TokenCreateParams{Name: "billing-bot", Hash: "hash-3", Now: at(3 * time.Hour)})
		noErr(t, err, "reuse a revoked name")
		got, err = s.TokenGetByHash(t.Context(), "hash-3")
		noErr(t, err, "get the new token")
		eq(t, got.ID, again.ID, "new token")

		list, err := s.TokenList(t.Context())
		noErr(t, err, "list")
		eq(t, len(list), 2, "tokens listed")
		byID := map[int64]*accounts.Token{}
		for _, tk := range list {
			byID[tk.ID] = tk
		}
		timePtrEq(t, byID[tok.ID].RevokedAt, ptr(at(time.Hour)), "revoked at")
		timePtrEq(t, byID[again.ID].RevokedAt, nil, "new token revoked at")
	}},
	{"Sessions", func(t *testing.T, s Store) {
		// Before login a session carries only the CSRF token.
		noErr(t, s.SessionSave(t.Context(), &accounts.Session{ID: "s-1", Data: "csrf=a", CreatedAt: at(0),
			ExpiresAt: at(time.Hour)}), "save anonymous")
		got, err := s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-1", Now: at(0)})
		noErr(t, err, "get")
		eq(t, got.UserID, 0, "anonymous user id")
		eq(t, got.Data, "csrf=a", "data")
		timeEq(t, got.CreatedAt, at(0), "created at")
		timeEq(t, got.ExpiresAt, at(time.Hour), "expires at")

		u := createUser(t, s, "ann@example.com", accounts.RoleAdmin, at(0))
		noErr(t, s.SessionSave(t.Context(), &accounts.Session{ID: "s-1", UserID: u.ID, Data: "csrf=a;user", CreatedAt: at(0),
			ExpiresAt: at(2 * time.Hour)}), "save logged in")
		got, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-1", Now: at(90 * time.Minute)})
		noErr(t, err, "get updated")
		eq(t, got.UserID, u.ID, "user id")
		eq(t, got.Data, "csrf=a;user", "updated data")
		timeEq(t, got.ExpiresAt, at(2*time.Hour), "updated expiry")

		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-1", Now: at(2 * time.Hour)})
		isErr(t, err, accounts.ErrNotFound, "expired session")
		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-unknown", Now: at(0)})
		isErr(t, err, accounts.ErrNotFound, "unknown session")

		noErr(t, s.SessionDelete(t.Context(), "s-1"), "delete")
		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "s-1", Now: at(0)})
		isErr(t, err, accounts.ErrNotFound, "deleted session")
		noErr(t, s.SessionDelete(t.Context(), "s-1"), "delete an absent session")
	}},
	{"LoginFailures", func(t *testing.T, s Store) {
		for _, d := range []time.Duration{0, time.Minute, 2 * time.Minute} {
			noErr(t, s.LoginFailureAdd(t.Context(), accounts.LoginFailureParams{Subject: "account:ann@example.com", At: at(d)}), "add")
		}
		noErr(t, s.LoginFailureAdd(t.Context(), accounts.LoginFailureParams{Subject: "addr:192.0.2.1", At: at(time.Minute)}), "add other")
		count := func(subject string, since time.Time) int {
			t.Helper()
			n, err := s.LoginFailureCount(t.Context(), accounts.LoginFailureCountParams{Subject: subject, Since: since})
			noErr(t, err, "count")
			return n
		}
		eq(t, count("account:ann@example.com", at(0)), 3, "all")
		eq(t, count("account:ann@example.com", at(time.Minute)), 2, "since a minute (inclusive)")
		eq(t, count("account:ann@example.com", at(time.Hour)), 0, "since an hour")
		eq(t, count("addr:192.0.2.1", at(0)), 1, "other subject")
		noErr(t, s.LoginFailureRemove(t.Context(), accounts.LoginFailureParams{Subject: "account:ann@example.com", At: at(time.Minute)}), "remove one attempt")
		eq(t, count("account:ann@example.com", at(0)), 2, "after removing the attempt at one minute")
		noErr(t, s.LoginFailureClear(t.Context(), "account:ann@example.com"), "clear")
		eq(t, count("account:ann@example.com", at(0)), 0, "after clear")
		eq(t, count("addr:192.0.2.1", at(0)), 1, "other subject after clear")
	}},
	{"Prune", func(t *testing.T, s Store) {
		for i, exp := range []time.Duration{time.Hour, 3 * time.Hour} {
			noErr(t, s.SessionSave(t.Context(), &accounts.Session{ID: fmt.Sprintf("p-%d", i), Data: "x", CreatedAt: at(0),
				ExpiresAt: at(exp)}), "save")
		}
		noErr(t, s.LoginFailureAdd(t.Context(), accounts.LoginFailureParams{Subject: "addr:a", At: at(0)}), "add old")
		noErr(t, s.LoginFailureAdd(t.Context(), accounts.LoginFailureParams{Subject: "addr:a", At: at(2 * time.Hour)}), "add recent")
		noErr(t, s.AccountsPrune(t.Context(), accounts.AccountsPruneParams{Now: at(2 * time.Hour), FailuresBefore: at(time.Hour)}), "prune")
		// Read the expired session as of a time before its expiry: only a
		// deleted row is missing then.
		_, err := s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "p-0", Now: at(0)})
		isErr(t, err, accounts.ErrNotFound, "expired session pruned")
		_, err = s.SessionGet(t.Context(), accounts.SessionGetParams{ID: "p-1", Now: at(0)})
		noErr(t, err, "live session kept")
		n, err := s.LoginFailureCount(t.Context(), accounts.LoginFailureCountParams{Subject: "addr:a", Since: at(-time.Hour)})
		noErr(t, err, "count")
		eq(t, n, 1, "old failure pruned, recent kept")
	}},
	{"SettingTakeOnce", func(t *testing.T, s Store) {
		_, err := s.SettingInit(t.Context(), accounts.SettingParams{Key: "setup_token", Value: "tok"})
		noErr(t, err, "init")
		took, err := s.SettingTake(t.Context(), accounts.SettingParams{Key: "setup_token", Value: "wrong"})
		noErr(t, err, "take with the wrong value")
		eq(t, took, false, "wrong value takes nothing")
		start := make(chan struct{})
		results := make(chan bool, 20)
		for range 20 {
			go func() {
				<-start
				took, err := s.SettingTake(context.Background(), accounts.SettingParams{Key: "setup_token", Value: "tok"})
				if err != nil {
					t.Error(err)
				}
				results <- took
			}()
		}
		close(start)
		won := 0
		for range 20 {
			if <-results {
				won++
			}
		}
		eq(t, won, 1, "concurrent takers that won")
		_, err = s.SettingGet(t.Context(), "setup_token")
		isErr(t, err, accounts.ErrNotFound, "taken setting")
	}},
	{"Settings", func(t *testing.T, s Store) {
		_, err := s.SettingGet(t.Context(), "session_key")
		isErr(t, err, accounts.ErrNotFound, "unknown setting")
		v, err := s.SettingInit(t.Context(), accounts.SettingParams{Key: "session_key", Value: "first"})
		noErr(t, err, "init")
		eq(t, v, "first", "initialised value")
		v, err = s.SettingInit(t.Context(), accounts.SettingParams{Key: "session_key", Value: "second"})
		noErr(t, err, "init again")
		eq(t, v, "first", "value after a second init")
		v, err = s.SettingGet(t.Context(), "session_key")
		noErr(t, err, "get")
		eq(t, v, "first", "stored value")

		// Concurrent starters agree on one secret.
		const n = 20
		start := make(chan struct{})
		var wg sync.WaitGroup
		vals := make([]string, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				vals[i], errs[i] = s.SettingInit(t.Context(), accounts.SettingParams{Key: "csrf_key", Value: string(rune('a' + i))})
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			noErr(t, errs[i], "concurrent init")
			eq(t, vals[i], vals[0], "agreed value")
		}
	}},
}
