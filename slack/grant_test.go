package slack_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/approvals/approvals/queue"
)

// "Approve + similar for 8h" is offered beside Approve, for a tool that
// takes grants and a message that may offer Approve at all; pressing it
// approves and grants, through the dashboard's path, and the next action
// like it is approved by the grant.
func TestSlackApproveSimilar(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		a := e.submit("post_update", "launch")
		quorum := e.submit("double_check", "launch")
		hidden := e.submit("post_note", "launch")
		e.deliver()
		blocks := map[string]string{}
		for _, p := range e.slack.Calls("chat.postMessage") {
			for _, id := range []string{a.ID, quorum.ID, hidden.ID} {
				if strings.Contains(p.Form.Get("blocks"), id) {
					blocks[id] += p.Form.Get("blocks")
				}
			}
		}
		if b := blocks[a.ID]; !strings.Contains(b, `"action_id":"approve_similar"`) || !strings.Contains(b, "Approve + similar for 8h") {
			t.Fatalf("post_update's message lacks the companion button: %s", b)
		}
		for _, id := range []string{quorum.ID, hidden.ID} {
			if strings.Contains(blocks[id], "approve_similar") {
				t.Errorf("%s offers Approve + similar: %s", e.action(id).Tool, blocks[id])
			}
		}
		// Pressed by someone outside the approvers: nothing changes.
		if status, _ := e.press("U0OUT", "approve_similar", a.ID); status != http.StatusOK {
			t.Fatalf("press: %d", status)
		}
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("after an outsider's press: %s", got.State)
		}
		if status, body := e.press("U0ANN", "approve_similar", a.ID); status != http.StatusOK || body != "" {
			t.Fatalf("approve similar: %d %q", status, body)
		}
		got := e.action(a.ID)
		if got.State != queue.StateApproved || got.DecidedBy == nil || *got.DecidedBy != "user:ann@example.com" {
			t.Fatalf("after approve similar: %s by %v", got.State, got.DecidedBy)
		}
		grants, err := e.store.GrantList(t.Context(), queue.GrantListParams{Active: new(true), Now: e.svc.Now()})
		if err != nil || len(grants) != 1 || grants[0].ActionID != a.ID || grants[0].Agent != "agent:bot" ||
			grants[0].ExpiresAt.Sub(grants[0].CreatedAt).Hours() != 8 {
			t.Fatalf("grants: %+v %v", grants, err)
		}
		if ev := lastEvent(t, e.store, a.ID); ev.Kind != queue.EventGrantCreated || ev.Channel != "slack" {
			t.Fatalf("last event %+v, want grant_created via slack", ev)
		}
		if next := e.submit("post_update", "follow-up"); next.State != queue.StateApproved || next.GrantID != grants[0].ID {
			t.Fatalf("the next post_update: %s %q", next.State, next.GrantID)
		}
		// The quorum tool's message has no such button, and a crafted press changes nothing.
		if status, _ := e.press("U0ANN", "approve_similar", quorum.ID); status != http.StatusOK {
			t.Fatalf("press: %d", status)
		}
		if got := e.action(quorum.ID); len(got.Approvals) != 0 {
			t.Fatalf("a crafted press on the quorum tool counted: %+v", got.Approvals)
		}
	})
}
