package main

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/pagerduty/pagerdutytest"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/teams/teamstest"
	"github.com/approvals/approvals/telegram/telegramtest"
)

// These tests run the binary as processes on one PostgreSQL database, as
// TestServerProcessNotifications does, for the channels of section 17: a
// sender killed (SIGKILL) while its request to Teams, Telegram or PagerDuty
// is under way loses nothing; after a restart the notification is sent
// again, once the dead sender's lease runs out.

// killMidSend kills p once arrived says its request reached the receiver,
// and checks the notification of action id stayed pending.
func killMidSend(t *testing.T, d *apptest.Deployment, p *apptest.Process, id string, arrived func() bool) {
	t.Helper()
	waitFor(t, "the request to reach the receiver", arrived)
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Exited
	if ns := notifications(d, id); len(ns) != 1 || ns[0].State != queue.NotificationPending || ns[0].Attempts != 1 {
		t.Fatalf("after the kill: %+v", ns)
	}
}

// waitFor polls cond, which reads what another process did, until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServerProcessNewChannels(t *testing.T) {
	t.Parallel()
	pgtest.BaseURL(t)
	bin := apptest.BuildBinary(t)

	t.Run("Teams: SIGKILL mid-send, restart, delivered", func(t *testing.T) {
		t.Parallel()
		hook := teamstest.New(t)
		hook.Hold(true)
		d := notifyDeployment(t, bin, `
channels:
  team-teams: { teams: { webhook: "`+hook.URL+`" } }
tools:
  post_update:
    class: at-most-once
    intent: "post:{slug}"
    preview: { title: "Update {slug}" }
    approval: { notify: [team-teams] }
`, "APPROVALS_OUTBOX_LEASE=4s")
		first := d.Start()
		a := d.Submit(first, "post_update", map[string]any{"slug": "teams"})
		killMidSend(t, d, first, a.ID, func() bool { return len(hook.Cards()) >= 1 })
		hook.Hold(false)
		s := d.Start()
		cards := hook.WaitFor(t, 2, 30*time.Second)
		if !strings.Contains(teamstest.Texts(cards[1]), "Update teams") {
			t.Fatalf("the card sent after the restart: %v", cards[1])
		}
		waitNotificationState(t, d, a.ID, queue.NotificationDelivered)
		waitMetrics(t, s.URL, "after the restart", `approvals_notifications_total{channel="teams",outcome="delivered"} 1`)
	})

	t.Run("Telegram: SIGKILL mid-send, restart, decide on the dashboard, edited", func(t *testing.T) {
		t.Parallel()
		const token = "7009876543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"
		bot := telegramtest.New(t, token)
		bot.Hold(true)
		d := notifyDeployment(t, bin, `
groups:
  leads: [ann@example.com]
channels:
  team-telegram: { telegram: { chat_id: "-100777" } }
tools:
  post_update:
    class: at-most-once
    intent: "post:{slug}"
    preview: { title: "Update {slug}", slug: "{slug}" }
    approval: { approvers: [leads], notify: [team-telegram] }
`, "APPROVALS_OUTBOX_LEASE=4s", "APPROVALS_TELEGRAM_BOT_TOKEN="+token, "APPROVALS_TELEGRAM_SECRET=process-secret",
			"APPROVALS_TELEGRAM_API_URL="+bot.URL)
		d.Command("correct horse battery staple\n", "user", "add", "--email", "ann@example.com", "--role", "approver", "--telegram-id", "4242")
		first := d.Start()
		a := d.Submit(first, "post_update", map[string]any{"slug": "tg"})
		killMidSend(t, d, first, a.ID, func() bool { return len(bot.Calls("sendMessage")) >= 1 })
		bot.Hold(false)
		s := d.Start()
		sent := bot.WaitFor(t, "sendMessage", 2, 30*time.Second)[1]
		if sent.MessageID == 0 || len(sent.Buttons()) != 3 {
			t.Fatalf("the message sent after the restart: %+v", sent)
		}
		waitNotificationState(t, d, a.ID, queue.NotificationDelivered)

		// The webhook of the restarted process: the secret is checked, the
		// Telegram id maps to ann, and her Approve decides.
		if res := telegramtest.Post(t, s.URL+"/integrations/telegram/webhook", "wrong", telegramtest.Press(1, 4242, "-100777", sent.MessageID, "approve:"+a.ID)); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong secret: %d", res.StatusCode)
		}
		if res := telegramtest.Post(t, s.URL+"/integrations/telegram/webhook", "process-secret", telegramtest.Press(2, 4242, "-100777", sent.MessageID, "approve:"+a.ID)); res.StatusCode != http.StatusOK {
			t.Fatalf("press: %d", res.StatusCode)
		}
		if got := d.Action(a.ID); got.State != queue.StateApproved || *got.DecidedBy != "user:ann@example.com" {
			t.Fatalf("after Approve in Telegram: %s by %v", got.State, got.DecidedBy)
		}
		bot.WaitFor(t, "answerCallbackQuery", 1, 30*time.Second)
		edit := bot.WaitFor(t, "editMessageText", 1, 30*time.Second)[0]
		if edit.Params["message_id"] != float64(sent.MessageID) || !strings.Contains(edit.Text(), "ann@example.com") {
			t.Fatalf("edit %v", edit.Params)
		}

		// A second action decided on the dashboard (the Domain process) is
		// edited too, by whichever process sends.
		b := d.Submit(s, "post_update", map[string]any{"slug": "tg-dash"})
		msg := bot.WaitFor(t, "sendMessage", 3, 30*time.Second)[2]
		if _, err := d.Domain().Service.Decide(context.Background(), queue.DecideRequest{ID: b.ID, To: queue.StateRejected, By: "user:ann@example.com", Note: "later"}); err != nil {
			t.Fatal(err)
		}
		edit = bot.WaitFor(t, "editMessageText", 2, 30*time.Second)[1]
		if edit.Params["message_id"] != float64(msg.MessageID) || !strings.Contains(edit.Text(), "Rejected") {
			t.Fatalf("edit after the dashboard decision %v", edit.Params)
		}
	})

	t.Run("PagerDuty: escalation triggers, SIGKILL mid-send, restart, decision resolves", func(t *testing.T) {
		t.Parallel()
		const key = "R0UTINGKEY0123456789abcdefPROCES"
		pd := pagerdutytest.New(t, key)
		pd.Hold(true)
		d := notifyDeployment(t, bin, `
groups:
  leads: [ann@example.com]
  night: [nora@example.com]
channels:
  pager: { pagerduty: { routing_key: "`+key+`" } }
tools:
  post_update:
    class: at-most-once
    intent: "post:{slug}"
    approval: { approvers: [leads], escalate_after: 1s, escalate_to: [night], escalate_notify: [pager] }
`, "APPROVALS_OUTBOX_LEASE=4s", "APPROVALS_PAGERDUTY_URL="+pd.URL)
		first := d.Start()
		a := d.Submit(first, "post_update", map[string]any{"slug": "paged"})
		killMidSend(t, d, first, a.ID, func() bool { return len(pd.Events()) >= 1 })
		pd.Hold(false)
		s := d.Start()
		tr := pd.WaitFor(t, "trigger", 1, 30*time.Second)[0]
		if tr.DedupKey != a.ID || tr.Links[0].Href != "https://approvals.example.com/actions/"+a.ID {
			t.Fatalf("trigger %+v", tr)
		}
		waitNotificationState(t, d, a.ID, queue.NotificationDelivered)
		if _, err := d.Domain().Service.Decide(context.Background(), queue.DecideRequest{ID: a.ID, To: queue.StateApproved, By: "user:ann@example.com"}); err != nil {
			t.Fatal(err)
		}
		if r := pd.WaitFor(t, "resolve", 1, 30*time.Second)[0]; r.DedupKey != a.ID || pd.Open(a.ID) {
			t.Fatalf("resolve %+v, open %v", r, pd.Open(a.ID))
		}
		waitMetrics(t, s.URL, "after the resolve", `approvals_notifications_total{channel="pagerduty",outcome="delivered"} 2`)
	})
}
