package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/approvals/approvals/queue"
)

// TestSweepEvents pins the events the domain gives the stores for the
// sweep and for a user's grants ending: the stores write them as they are.
func TestSweepEvents(t *testing.T) {
	now := time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		p    queue.DueParams
		kind string
		data string
	}{
		{"expiry", queue.ExpiryDue(now, 7), queue.EventExpired, ""},
		{"plan expiry", queue.PlanExpiryDue(now, 7), queue.EventPlanExpired, ""},
		{"stale", queue.StaleDue(now, 7), queue.EventTicketOpened, `{"kind":"stale"}`},
		{"reminder", queue.ReminderDue(now, 7), queue.EventReminder, ""},
		{"escalation", queue.EscalationDue(now, 7), queue.EventEscalated, ""},
	} {
		ev := c.p.Event
		if !c.p.Now.Equal(now) || c.p.Limit != 7 || ev.Kind != c.kind || ev.Actor != "system" ||
			ev.Channel != "" || !ev.At.Equal(now) || ev.ActionID != "" || (c.data == "") != (ev.Data == nil) ||
			(c.data != "" && !queue.JSONEqual(ev.Data, []byte(c.data))) {
			t.Errorf("%s: %+v (data %s)", c.name, c.p, ev.Data)
		}
	}
	ev := queue.GrantEndOfUser(queue.GrantEndGranterDemoted, now)
	want := json.RawMessage(`{"reason":"granter_demoted"}`)
	if ev.Kind != queue.EventGrantRevoked || ev.Actor != queue.GrantSystemActor || ev.Channel != queue.GrantSystemActor ||
		!ev.At.Equal(now) || !queue.JSONEqual(ev.Data, want) {
		t.Errorf("grant end: %+v (data %s)", ev, ev.Data)
	}
}
