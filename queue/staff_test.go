package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// RecordStaffEvent writes an event of no action at the service clock's
// time, with what was typed kept visible (a control character or a byte
// that is not UTF-8 becomes U+FFFD, which every store keeps), and refuses
// an event without a kind or an actor; on both stores.
func TestRecordStaffEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 3, 14, 9, 26, 53, 0, time.UTC)
	apptest.OnBothStores(t, apptest.EnvOptions{Clock: testclock.At(at)}, func(t *testing.T, e *apptest.Env) {
		ctx := context.Background()
		if err := e.Service.RecordStaffEvent(ctx, queue.StaffEvent{Kind: queue.EventSignInRefused, Actor: queue.ActorAnonymous,
			Subject: queue.UserSubject("eve\x00\x1b\xff@example.com"), Channel: "password",
			Data: map[string]any{"reason": "bad_credentials"}}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []queue.StaffEvent{{Actor: "user:a@example.com"}, {Kind: queue.EventSignedIn}} {
			if err := e.Service.RecordStaffEvent(ctx, bad); err == nil {
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
