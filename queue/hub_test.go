package queue

import (
	"fmt"
	"slices"
	"testing"
)

// A subscriber of one action gets that action's changes and no other's;
// a subscriber of all changes gets every one; Cancel and Close release
// both kinds, and a cancelled action leaves no entry behind.
func TestHubSubscribeAction(t *testing.T) {
	h := NewHub()
	all, a, b := h.Subscribe(), h.SubscribeAction("a", nil), h.SubscribeAction("b", nil)
	h.Publish(Change{ActionID: "a", State: StateApproved})
	if c := <-a.Changes; c.ActionID != "a" || c.State != StateApproved {
		t.Fatalf("a got %+v", c)
	}
	if c := <-all.Changes; c.ActionID != "a" {
		t.Fatalf("all got %+v", c)
	}
	select {
	case c := <-b.Changes:
		t.Fatalf("b got a's change %+v", c)
	default:
	}
	// Two changes before the waiter reads: one wake-up, no block.
	h.Publish(Change{ActionID: "b", State: StateApproved})
	h.Publish(Change{ActionID: "b", State: StateInProgress})
	if c := <-b.Changes; c.ActionID != "b" {
		t.Fatalf("b got %+v", c)
	}
	b.Cancel()
	if _, ok := <-b.Changes; ok {
		t.Fatal("a cancelled subscription stays open")
	}
	h.mu.Lock()
	_, left := h.byID["b"]
	h.mu.Unlock()
	if left {
		t.Fatal("the last subscriber of b left its entry in the hub")
	}
	// WakeActions: every action's subscriber hears of its own action, the
	// subscribers of all changes of nothing (after b's two changes).
	for range 2 {
		if c := <-all.Changes; c.ActionID != "b" {
			t.Fatalf("all got %+v", c)
		}
	}
	h.WakeActions()
	if c := <-a.Changes; c.ActionID != "a" {
		t.Fatalf("a woken with %+v", c)
	}
	select {
	case c := <-all.Changes:
		t.Fatalf("WakeActions reached a subscriber of all changes: %+v", c)
	default:
	}
	h.Close()
	if _, ok := <-a.Changes; ok {
		t.Fatal("Close left an action's subscriber open")
	}
	if _, ok := <-h.SubscribeAction("c", nil).Changes; ok {
		t.Fatal("a subscription after Close is open")
	}
}

// An action's subscriber with a wake function is woken, after its change
// is in its buffer, by each change of its action and no other's, by
// WakeActions, and when the hub closes; a cancelled one is not.
func TestHubSubscribeActionWakes(t *testing.T) {
	h := NewHub()
	var woken []string
	var a Subscription
	a = h.SubscribeAction("a", func() {
		select {
		case c, ok := <-a.Changes:
			woken = append(woken, fmt.Sprintf("%s %v", c.State, ok))
		default:
			woken = append(woken, "woken with nothing buffered")
		}
	})
	cancelled := h.SubscribeAction("a", func() { woken = append(woken, "cancelled subscriber woken") })
	cancelled.Cancel()
	h.Publish(Change{ActionID: "a", State: StateApproved})
	h.Publish(Change{ActionID: "b", State: StateApproved})
	h.WakeActions()
	h.Close()
	want := []string{"approved true", " true", " false"}
	if !slices.Equal(woken, want) {
		t.Fatalf("wakes %q, want %q", woken, want)
	}
}
