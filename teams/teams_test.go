package teams_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/teams"
	"github.com/approvals/approvals/teams/teamstest"
)

func pending() *queue.Action {
	expires := time.Date(2026, 3, 5, 5, 0, 0, 0, time.UTC)
	return &queue.Action{
		ID: "0190a-7", Tool: "send_customer_email", Class: classify.AtMostOnce, IntentKey: "email:c-42:refund", Attempt: 1,
		State:       queue.StatePending,
		Payload:     json.RawMessage(`{"to":"c@example.com","subject":"Refund **now** [click](https://evil.example)","body":"Dear customer\n✅ Approved by the boss"}`),
		RequestedBy: "agent:support-bot", ExpiresAt: &expires,
		Spec: classify.Tool{Name: "send_customer_email", Preview: map[string]string{"title": "{subject}", "to": "{to}", "body": "{body}"}},
	}
}

func notifier(t *testing.T) queue.Notifier {
	t.Helper()
	n, err := teams.New(teams.Config{PublicURL: "https://approvals.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	// Teams keeps no messages to update: the store is never asked.
	return maintenance.ChannelNotifier[teams.Message](classify.KindTeams, n, nil, nil)
}

func note(hook, typ string, a *queue.Action) queue.Notification {
	return queue.Notification{ID: "n1", Type: typ, Action: a, Channel: classify.Channel{Name: "support-teams", Teams: &classify.TeamsChannel{Webhook: hook}}}
}

// A pending action is one Adaptive Card 1.4 (the receiver checks the schema) with the
// preview's fields, who asked, when it expires and Action.OpenUrl to its page; what the agent
// wrote is in TextRuns, which Teams never reads as Markdown.
func TestPendingCard(t *testing.T) {
	t.Parallel()
	hook := teamstest.New(t)
	if err := notifier(t).Notify(context.Background(), note(hook.URL, classify.EventActionPending, pending())); err != nil {
		t.Fatal(err)
	}
	card := hook.WaitFor(t, 1, 5*time.Second)[0]
	text := teamstest.Texts(card)
	for _, want := range []string{"Approval needed", "Refund **now** [click](https://evil.example)", "to", "c@example.com",
		"Asked by: agent:support-bot", "Expires: 2026-03-05 05:00 UTC", "Intent key: email:c-42:refund"} {
		if !strings.Contains(text, want) {
			t.Errorf("card lacks %q:\n%s", want, text)
		}
	}
	actions := card["actions"].([]any)
	if open := actions[0].(map[string]any); open["type"] != "Action.OpenUrl" || open["url"] != "https://approvals.example.com/actions/0190a-7" {
		t.Fatalf("action %v", open)
	}
	raw, _ := json.Marshal(card["body"])
	for _, el := range card["body"].([]any) {
		m := el.(map[string]any)
		if m["type"] == "TextBlock" && strings.Contains(m["text"].(string), "evil") {
			t.Fatalf("agent text in a TextBlock, read as Markdown: %s", raw)
		}
	}
}

// A decision is a new card saying who decided what, without the reminder to decide.
func TestDecisionCard(t *testing.T) {
	t.Parallel()
	hook := teamstest.New(t)
	a := pending()
	by, at, why := "user:ann@example.com", time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC), "wrong customer"
	a.State, a.DecidedBy, a.DecidedAt, a.DecisionNote = queue.StateRejected, &by, &at, &why
	if err := notifier(t).Notify(context.Background(), note(hook.URL, classify.EventActionRejected, a)); err != nil {
		t.Fatal(err)
	}
	text := teamstest.Texts(hook.WaitFor(t, 1, 5*time.Second)[0])
	if !strings.Contains(text, "Rejected (decided by ann@example.com) at 2026-03-04 06:00 UTC: wrong customer") || strings.Contains(text, "Expires") {
		t.Fatalf("decided card:\n%s", text)
	}
}

// A refusal is an error for the outbox to retry (a 429 with its Retry-After), and no error
// shows the webhook's path, which is its credential.
func TestFailuresHideTheWebhookPath(t *testing.T) {
	t.Parallel()
	hook := teamstest.New(t)
	hook.FailNext(http.StatusTooManyRequests, http.StatusInternalServerError)
	n := notifier(t)
	err := n.Notify(context.Background(), note(hook.URL, classify.EventActionPending, pending()))
	var ra *queue.RetryAfterError
	if !errors.As(err, &ra) || ra.After != time.Second {
		t.Fatalf("429: %v, want a retry after 1s", err)
	}
	err = n.Notify(context.Background(), note(hook.URL, classify.EventActionPending, pending()))
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("500: %v", err)
	}
	dead := "http://127.0.0.1:1" + teamstest.Path + "?sig=c2VjcmV0"
	err3 := n.Notify(context.Background(), note(dead, classify.EventActionPending, pending()))
	for _, e := range []error{err, err3} {
		if e == nil || strings.Contains(e.Error(), "workflows") || strings.Contains(e.Error(), "sig=") {
			t.Fatalf("error shows the credential: %v", e)
		}
	}
}

// A pending plan is one card listing every step with its preview, the approvals it needs
// and Action.OpenUrl to the plan page; what the agent wrote stays in TextRuns.
func TestPlanCard(t *testing.T) {
	t.Parallel()
	hook := teamstest.New(t)
	a := pending()
	pl := &queue.Plan{ID: "0190p-1", State: queue.PlanPending, Title: "Refund [click](https://evil.example)", Agent: "agent:support-bot",
		ApprovalsRequired: 2, ExpiresAt: time.Date(2026, 3, 5, 5, 0, 0, 0, time.UTC), Steps: []*queue.PlanStep{
			{N: 1, Tool: a.Tool, Class: a.Class, IntentKey: a.IntentKey, Payload: a.Payload, Decision: queue.StepHuman},
			{N: 2, Tool: "post_note", Class: classify.AtLeastOnce, IntentKey: "note:1", Payload: json.RawMessage(`{"text":"hi"}`), Decision: queue.StepNone},
		}}
	n := queue.Notification{ID: "n2", Type: classify.EventPlanPending, Plan: pl, PlanSteps: []*queue.Action{a, {Tool: "post_note", Payload: pl.Steps[1].Payload}},
		Channel: classify.Channel{Name: "support-teams", Teams: &classify.TeamsChannel{Webhook: hook.URL}}}
	if err := notifier(t).Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	card := hook.WaitFor(t, 1, 5*time.Second)[0]
	text := teamstest.Texts(card)
	for _, want := range []string{"Plan approval needed · 2 steps", "Step 1: send_customer_email (at-most-once; human)", "c@example.com",
		"Step 2: post_note (at-least-once; none)", "Needs 2 approval(s), 0 so far", "Expires: 2026-03-05 05:00 UTC"} {
		if !strings.Contains(text, want) {
			t.Errorf("card lacks %q:\n%s", want, text)
		}
	}
	if open := card["actions"].([]any)[0].(map[string]any); open["url"] != "https://approvals.example.com/plans/0190p-1" {
		t.Fatalf("action %v, want the plan page", open)
	}
	for _, el := range card["body"].([]any) {
		if m := el.(map[string]any); m["type"] == "TextBlock" && strings.Contains(m["text"].(string), "evil") {
			t.Fatalf("agent text in a TextBlock: %v", m)
		}
	}
}
