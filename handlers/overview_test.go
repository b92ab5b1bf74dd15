package handlers_test

import (
	"context"
	"testing"
	"time"

	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
)

// The overview page's cache: a second view within OverviewMaxAge is the
// same computation (a new pending action does not show), one after it is
// computed again and shows it.
func TestCachedOverviewAgesOnTheServiceClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := apptest.DomainEnv(t, testclock.Frozen())
	var cache handlers.OverviewCache
	e.Submit("send_customer_email", map[string]any{"customer_id": "c-1", "topic": "cache"})
	first, err := cache.Get(ctx, e.Store, e.Service.Now())
	if err != nil {
		t.Fatal(err)
	}
	if first.PendingTotal != 1 {
		t.Fatalf("pending %d, want 1", first.PendingTotal)
	}
	e.Submit("send_customer_email", map[string]any{"customer_id": "c-2", "topic": "cache"})
	e.Clock.Advance(handlers.OverviewMaxAge - time.Second)
	again, err := cache.Get(ctx, e.Store, e.Service.Now())
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("computed again within %s: pending %d", handlers.OverviewMaxAge, again.PendingTotal)
	}
	e.Clock.Advance(time.Second)
	later, err := cache.Get(ctx, e.Store, e.Service.Now())
	if err != nil {
		t.Fatal(err)
	}
	if later.PendingTotal != 2 || !later.Now.After(first.Now) {
		t.Fatalf("after %s: pending %d at %s, want 2, computed anew", handlers.OverviewMaxAge, later.PendingTotal, later.Now)
	}
}
