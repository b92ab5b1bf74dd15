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
// Slack and Telegram ids of users and the messages channels sent for
// actions.
var routingTests = []test{
	{"TelegramIDs", func(t *testing.T, s Store) {
		ctx := t.Context()
		ann := createUser(t, s, "ann@example.com", accounts.RoleApprover, at(0))
		bob := createUser(t, s, "bob@example.com", accounts.RoleApprover, at(0))
		eq(t, ann.TelegramID, int64(0), "a new user has no Telegram id")
		if _, err := s.UserGetByTelegramID(ctx, 0); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("Telegram id 0: %v, want ErrNotFound", err)
		}
		noErr(t, s.UserSetTelegramID(ctx, accounts.UserSetTelegramIDParams{ID: ann.ID, TelegramID: 5001}), "set ann's Telegram id")
		got, err := s.UserGetByTelegramID(ctx, 5001)
		noErr(t, err, "find ann by Telegram id")
		eq(t, got.Email, "ann@example.com", "found user")
		eq(t, got.TelegramID, int64(5001), "found user's Telegram id")
		if err := s.UserSetTelegramID(ctx, accounts.UserSetTelegramIDParams{ID: bob.ID, TelegramID: 5001}); !errors.Is(err, accounts.ErrTelegramIDTaken) {
			t.Fatalf("a second user with ann's Telegram id: %v, want ErrTelegramIDTaken", err)
		}
		// Create and update refuse a taken id whole, and a taken email wins.
		if _, err := s.UserCreate(ctx, &accounts.User{Email: "cara@example.com", PasswordHash: "x", Role: accounts.RoleApprover,
			CreatedAt: at(0), TelegramID: 5001}); !errors.Is(err, accounts.ErrTelegramIDTaken) {
			t.Fatalf("create a user with ann's Telegram id: %v, want ErrTelegramIDTaken", err)
		}
		if _, err := s.UserGetByEmail(ctx, "cara@example.com"); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("the refused user exists: %v", err)
		}
		if _, err := s.UserCreate(ctx, &accounts.User{Email: "ann@example.com", PasswordHash: "x", Role: accounts.RoleApprover,
			CreatedAt: at(0), TelegramID: 5001}); !errors.Is(err, accounts.ErrExists) {
			t.Fatalf("create ann again with her own Telegram id: %v, want ErrExists", err)
		}
		dan, err := s.UserCreate(ctx, &accounts.User{Email: "dan@example.com", PasswordHash: "x", Role: accounts.RoleApprover,
			CreatedAt: at(0), TelegramID: 5004})
		noErr(t, err, "create dan with a Telegram id")
		eq(t, dan.TelegramID, int64(5004), "created user's Telegram id")
		if err := s.UserUpdate(ctx, accounts.UserUpdateParams{ID: bob.ID, PasswordHash: "new", Role: accounts.RoleApprover,
			TelegramID: 5001, Now: at(time.Minute)}); !errors.Is(err, accounts.ErrTelegramIDTaken) {
			t.Fatalf("update bob with ann's Telegram id: %v, want ErrTelegramIDTaken", err)
		}
		u, err := s.UserGetByEmail(ctx, "bob@example.com")
		noErr(t, err, "get bob")
		eq(t, u.PasswordHash, bob.PasswordHash, "a refused update changes nothing")
		noErr(t, s.UserUpdate(ctx, accounts.UserUpdateParams{ID: bob.ID, PasswordHash: "new", Role: accounts.RoleApprover,
			TelegramID: 5002, Now: at(time.Minute)}), "update bob's Telegram id")
		noErr(t, s.UserUpdate(ctx, accounts.UserUpdateParams{ID: bob.ID, PasswordHash: "newer", Role: accounts.RoleApprover,
			Now: at(time.Minute)}), "update bob without a Telegram id")
		u, err = s.UserGetByTelegramID(ctx, 5002)
		noErr(t, err, "bob keeps his Telegram id")
		eq(t, u.Email, "bob@example.com", "found bob")
		if err := s.UserSetTelegramID(ctx, accounts.UserSetTelegramIDParams{ID: 999999, TelegramID: 9}); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("Telegram id of an unknown user: %v, want ErrNotFound", err)
		}
		noErr(t, s.UserSetTelegramID(ctx, accounts.UserSetTelegramIDParams{ID: ann.ID}), "clear ann's Telegram id")
		noErr(t, s.UserSetTelegramID(ctx, accounts.UserSetTelegramIDParams{ID: bob.ID, TelegramID: 5001}), "the cleared id is free again")
	}},
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
	{"ChannelMessages", func(t *testing.T, s Store) {
		ctx := t.Context()
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "slack:1", at(0))
		for _, m := range []queue.ChannelMessage{
			{ActionID: a.ID, Kind: classify.KindSlack, Address: "C2", Ref: "2.0", SentAt: at(2 * time.Second)},
			{ActionID: a.ID, Kind: classify.KindSlack, Address: "C1", Ref: "1.0", SentAt: at(time.Second)},
			{ActionID: a.ID, Kind: classify.KindSlack, Address: "C1", Ref: "1.0", SentAt: at(time.Second)}, // a repeated notification
			// The same address and ref of another kind is another message.
			{ActionID: a.ID, Kind: classify.KindTelegram, Address: "C1", Ref: "1.0", SentAt: at(3 * time.Second)},
			{ActionID: a.ID, Kind: classify.KindPagerDuty, Address: "pd", Ref: a.ID, SentAt: at(4 * time.Second)},
		} {
			noErr(t, s.ChannelMessageAdd(ctx, m), "add channel message")
		}
		list, err := s.ChannelMessageList(ctx, a.ID)
		noErr(t, err, "list channel messages")
		eq(t, len(list), 4, "messages")
		eq(t, list[0].Ref, "1.0", "oldest first")
		eq(t, list[0].Kind, classify.KindSlack, "kind")
		eq(t, list[2].Kind, classify.KindTelegram, "the other kind's message")
		eq(t, list[3].Address, "pd", "address")
		timeEq(t, list[1].SentAt, at(2*time.Second), "sent at")
		for _, id := range []string{queue.NewID(at(0)), "not-a-uuid"} {
			if err := s.ChannelMessageAdd(ctx, queue.ChannelMessage{ActionID: id, Kind: classify.KindSlack, Address: "C1", Ref: "3.0", SentAt: at(0)}); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("message for unknown action %q: %v, want ErrNotFound", id, err)
			}
		}
		if err := s.ChannelMessageAdd(ctx, queue.ChannelMessage{ActionID: a.ID, Kind: classify.KindEmail, Address: "x", Ref: "1", SentAt: at(0)}); err == nil {
			t.Fatal("a message of a kind that updates nothing (email) was stored")
		}
		other := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "slack:2", at(0))
		if list, err := s.ChannelMessageList(ctx, other.ID); err != nil || len(list) != 0 {
			t.Fatalf("another action's messages: %v (%v), want none", list, err)
		}
	}},
}
