package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// routingTests cover what approval routing stores beside the decisions:
// Slack ids of users and the Slack messages posted for actions.
var routingTests = []test{
	{"SlackIDs", func(t *testing.T, s Store) {
		ctx := t.Context()
		ann := createUser(t, s, "ann@example.com", accounts.RoleApprover, at(0))
		bob := createUser(t, s, "bob@example.com", accounts.RoleApprover, at(0))
		eq(t, ann.SlackID, "", "a new user has no Slack id")
		if _, err := s.UserGetBySlackID(ctx, "U1"); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("unknown Slack id: %v, want ErrNotFound", err)
		}
		noErr(t, s.UserSetSlackID(ctx, accounts.UserSetSlackIDParams{ID: ann.ID, SlackID: "U1"}), "set ann's Slack id")
		got, err := s.UserGetBySlackID(ctx, "U1")
		noErr(t, err, "find ann by Slack id")
		eq(t, got.Email, "ann@example.com", "found user")
		eq(t, got.SlackID, "U1", "found user's Slack id")
		if err := s.UserSetSlackID(ctx, accounts.UserSetSlackIDParams{ID: bob.ID, SlackID: "U1"}); !errors.Is(err, accounts.ErrSlackIDTaken) {
			t.Fatalf("a second user with ann's Slack id: %v, want ErrSlackIDTaken", err)
		}
		// A user created with a taken Slack id is not created at all; one
		// created with a free id has it at once.
		if _, err := s.UserCreate(ctx, &accounts.User{Email: "cara@example.com", PasswordHash: "x", Role: accounts.RoleApprover,
			CreatedAt: at(0), SlackID: "U1"}); !errors.Is(err, accounts.ErrSlackIDTaken) || errors.Is(err, accounts.ErrExists) {
			t.Fatalf("create a user with ann's Slack id: %v, want ErrSlackIDTaken", err)
		}
		if _, err := s.UserGetByEmail(ctx, "cara@example.com"); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("the refused user exists: %v", err)
		}
		cara, err := s.UserCreate(ctx, &accounts.User{Email: "cara@example.com", PasswordHash: "x", Role: accounts.RoleApprover,
			CreatedAt: at(0), SlackID: "U3"})
		noErr(t, err, "create cara with a free Slack id")
		eq(t, cara.SlackID, "U3", "created user's Slack id")
		if _, err := s.UserCreate(ctx, &accounts.User{Email: "ann@example.com", PasswordHash: "x", Role: accounts.RoleApprover,
			CreatedAt: at(0), SlackID: "U4"}); !errors.Is(err, accounts.ErrExists) {
			t.Fatalf("create with a taken email and a free Slack id: %v, want ErrExists", err)
		}
		// A taken email with that same user's own Slack id is ErrExists on
		// both stores (SQLite checks users_slack_id first): `user add
		// --update` re-run for a user updates on ErrExists only.
		if _, err := s.UserCreate(ctx, &accounts.User{Email: "CARA@example.com", PasswordHash: "x", Role: accounts.RoleApprover,
			CreatedAt: at(0), SlackID: "U3"}); !errors.Is(err, accounts.ErrExists) || errors.Is(err, accounts.ErrSlackIDTaken) {
			t.Fatalf("create with a taken email and that user's own Slack id: %v, want ErrExists", err)
		}
		if _, err := s.UserGetBySlackID(ctx, "U4"); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("the Slack id of a refused user is stored: %v", err)
		}
		if err := s.UserSetSlackID(ctx, accounts.UserSetSlackIDParams{ID: 999999, SlackID: "U9"}); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("Slack id of an unknown user: %v, want ErrNotFound", err)
		}
		// Unset ids do not collide with each other, and "" finds nobody.
		noErr(t, s.UserSetSlackID(ctx, accounts.UserSetSlackIDParams{ID: ann.ID, SlackID: ""}), "clear ann's Slack id")
		if _, err := s.UserGetBySlackID(ctx, ""); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("empty Slack id: %v, want ErrNotFound", err)
		}
		noErr(t, s.UserSetSlackID(ctx, accounts.UserSetSlackIDParams{ID: bob.ID, SlackID: "U1"}), "the cleared id is free again")
		u, err := s.UserGetByEmail(ctx, "bob@example.com")
		noErr(t, err, "get bob")
		eq(t, u.SlackID, "U1", "UserGetByEmail reads the Slack id")
	}},
	{"SlackMessages", func(t *testing.T, s Store) {
		ctx := t.Context()
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "slack:1", at(0))
		for _, m := range []queue.SlackMessage{
			{ActionID: a.ID, Channel: "C2", TS: "2.0", PostedAt: at(2 * time.Second)},
			{ActionID: a.ID, Channel: "C1", TS: "1.0", PostedAt: at(time.Second)},
			{ActionID: a.ID, Channel: "C1", TS: "1.0", PostedAt: at(time.Second)}, // a repeated notification
		} {
			noErr(t, s.SlackMessageAdd(ctx, m), "add Slack message")
		}
		list, err := s.SlackMessageList(ctx, a.ID)
		noErr(t, err, "list Slack messages")
		eq(t, len(list), 2, "messages")
		eq(t, list[0].TS, "1.0", "oldest first")
		timeEq(t, list[1].PostedAt, at(2*time.Second), "posted at")
		for _, id := range []string{queue.NewID(at(0)), "not-a-uuid"} {
			if err := s.SlackMessageAdd(ctx, queue.SlackMessage{ActionID: id, Channel: "C1", TS: "3.0", PostedAt: at(0)}); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("message for unknown action %q: %v, want ErrNotFound", id, err)
			}
		}
	}},
}
