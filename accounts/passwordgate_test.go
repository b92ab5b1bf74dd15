package accounts_test

import (
	"context"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
)

// TestPasswordGate: n checks run at once; the next waits and is refused
// when none comes free, or gets the slot a release frees.
func TestPasswordGate(t *testing.T) {
	t.Parallel()
	g := accounts.NewPasswordGate(2, time.Millisecond)
	r1, ok1 := g.Acquire(context.Background())
	_, ok2 := g.Acquire(context.Background())
	if !ok1 || !ok2 {
		t.Fatal("the first two checks were refused")
	}
	if _, ok := g.Acquire(context.Background()); ok {
		t.Fatal("a third check ran while two were running")
	}
	r1()
	if _, ok := g.Acquire(context.Background()); !ok {
		t.Fatal("a released slot was not given out")
	}

	// A waiting check gets a slot freed while it waits.
	g = accounts.NewPasswordGate(1, time.Minute)
	release, _ := g.Acquire(context.Background())
	got := make(chan bool)
	go func() { _, ok := g.Acquire(context.Background()); got <- ok }()
	release()
	if !<-got {
		t.Fatal("the waiting check was refused after a release")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := g.Acquire(ctx); ok {
		t.Fatal("a check with its request gone got a slot while all were busy")
	}
}
