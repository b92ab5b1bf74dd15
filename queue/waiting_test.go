package queue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/approvals/approvals/queue"
)

// "Waiting for me" keeps the pending actions a person may decide and has
// not approved yet, and pages through them without losing or repeating
// one, however many actions for others lie between them.
func TestListWaitingFor(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, svc *queue.Service, _ queue.Store) {
		ctx := context.Background()
		var forLeads []*queue.Action
		for i := range 5 {
			forLeads = append(forLeads, submitPending(t, svc, "send_customer_email", fmt.Sprintf("lead-%d", i)))
			submitPending(t, svc, "post_update", fmt.Sprintf("anyone-%d", i)) // no approvers: anyone may decide
		}
		// ann approved the first (one of two needed): it no longer waits for her.
		if _, err := svc.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: forLeads[0].ID, By: "user:ann@example.com"}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			by   string
			want int
		}{
			{"user:ann@example.com", 9},  // 4 for leads + 5 for anyone
			{"user:bob@example.com", 10}, // all of them
			{"user:dan@example.com", 5},  // not a lead: only the open tool's
		} {
			var got []*queue.Action
			cursor := ""
			for pages := 0; ; pages++ {
				page, next, err := svc.List(ctx, queue.ListRequest{WaitingFor: tc.by, Oldest: true, Limit: 2, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, page...)
				if next == "" || pages > 20 {
					break
				}
				cursor = next
			}
			seen := map[string]bool{}
			for _, a := range got {
				if seen[a.ID] {
					t.Fatalf("%s: %s listed twice", tc.by, a.ID)
				}
				seen[a.ID] = true
				if !a.MayDecide(queue.Decider{By: tc.by}) || a.Approved(tc.by) || a.State != queue.StatePending {
					t.Fatalf("%s: %s (%s) does not wait for them", tc.by, a.ID, a.Tool)
				}
			}
			if len(got) != tc.want {
				t.Fatalf("%s: %d actions wait, want %d", tc.by, len(got), tc.want)
			}
			if tc.by == "user:ann@example.com" && seen[forLeads[0].ID] {
				t.Fatal("the action ann approved still waits for her")
			}
		}
	})
}
