package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

var reasonPromptTests = []test{
	{"AddGet", func(t *testing.T, s Store) {
		ctx := t.Context()
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "prompt:1", at(0))
		b := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "prompt:2", at(0))
		p := queue.ReasonPrompt{Kind: classify.KindTelegram, Address: "-1001234567890", Ref: "101", ActionID: a.ID, Asked: "1002", SentAt: at(time.Second)}
		noErr(t, s.ReasonPromptAdd(ctx, p), "add prompt")
		got, err := s.ReasonPromptGet(ctx, queue.ReasonPromptGetParams{Kind: p.Kind, Address: p.Address, Ref: p.Ref})
		noErr(t, err, "get prompt")
		eq(t, got.ActionID, a.ID, "action")
		eq(t, got.Asked, "1002", "the user asked")
		eq(t, got.Kind, classify.KindTelegram, "kind")
		eq(t, got.Address, p.Address, "address")
		eq(t, got.Ref, p.Ref, "ref")
		timeEq(t, got.SentAt, at(time.Second), "sent at")

		// The same message again, aimed at another action and user, is
		// refused and the first record stays.
		again := p
		again.ActionID, again.Asked = b.ID, "666"
		if err := s.ReasonPromptAdd(ctx, again); err == nil {
			t.Fatal("a message recorded twice was accepted")
		}
		got, err = s.ReasonPromptGet(ctx, queue.ReasonPromptGetParams{Kind: p.Kind, Address: p.Address, Ref: p.Ref})
		noErr(t, err, "get prompt after the refused add")
		eq(t, got.ActionID, a.ID, "the first record stays")
		eq(t, got.Asked, "1002", "the first record's user stays")

		// The same ref in another chat is another message.
		other := queue.ReasonPrompt{Kind: classify.KindTelegram, Address: "-100999", Ref: "101", ActionID: b.ID, Asked: "1001", SentAt: at(2 * time.Second)}
		noErr(t, s.ReasonPromptAdd(ctx, other), "add the other chat's prompt")
		got, err = s.ReasonPromptGet(ctx, queue.ReasonPromptGetParams{Kind: other.Kind, Address: other.Address, Ref: other.Ref})
		noErr(t, err, "get the other chat's prompt")
		eq(t, got.ActionID, b.ID, "the other chat's action")

		// A message never recorded is not found, whatever is near it.
		for _, q := range []queue.ReasonPromptGetParams{
			{Kind: classify.KindTelegram, Address: p.Address, Ref: "102"},
			{Kind: classify.KindTelegram, Address: "-1001", Ref: p.Ref},
			{Kind: classify.KindSlack, Address: p.Address, Ref: p.Ref},
			{},
		} {
			if _, err := s.ReasonPromptGet(ctx, q); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("get %+v: %v, want ErrNotFound", q, err)
			}
		}
		for _, id := range []string{queue.NewID(at(0)), "not-a-uuid"} {
			if err := s.ReasonPromptAdd(ctx, queue.ReasonPrompt{Kind: classify.KindTelegram, Address: "-1", Ref: "1", ActionID: id, Asked: "1", SentAt: at(0)}); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("prompt for unknown action %q: %v, want ErrNotFound", id, err)
			}
		}
		if err := s.ReasonPromptAdd(ctx, queue.ReasonPrompt{Kind: classify.KindEmail, Address: "x", Ref: "1", ActionID: a.ID, Asked: "1", SentAt: at(0)}); err == nil {
			t.Fatal("a prompt of a kind that asks nothing (email) was stored")
		}
	}},
}
