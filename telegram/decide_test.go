package telegram_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/telegram"
	"github.com/approvals/approvals/telegram/telegramtest"
	"github.com/approvals/approvals/web"
)

const (
	botToken = "7001234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"
	secret   = "webhook-secret_0123456789"
	chatID   = "-1001234567890"
)

// Telegram ids of the staff: ann approves, bob is an admin, vic is a viewer in the group,
// out may decide but is not among the tool's approvers, and nobody has 999.
const (
	ann, bob, vic, out, stranger int64 = 1001, 1002, 1003, 1004, 999
)

const tools = `
groups:
  leads: [ann@example.com, bob@example.com, vic@example.com]
  idp-leads: ["idp:support-leads"]
channels:
  team-telegram: { telegram: { chat_id: "-1001234567890" } }
tools:
  post_update:
    class: at-most-once
    intent: "post:{slug}"
    preview: { title: "{text}", slug: "{slug}" }
    approval: { approvers: [leads], notify: [team-telegram] }
  double_check:
    class: at-most-once
    intent: "check:{slug}"
    preview: { title: "{text}", slug: "{slug}" }
    approval: { approvers: [leads], required: 2, notify: [team-telegram] }
  post_note:
    class: at-most-once
    intent: "note:{slug}"
    preview: { title: "{text}" }
    approval: { approvers: [leads], notify: [team-telegram] }
  post_comment:
    class: at-most-once
    intent: "comment:{slug}"
    preview: { title: "Comment on {slug}", body: "{text}" }
    approval: { approvers: [leads], notify: [team-telegram] }
  post_idp_update:
    class: at-most-once
    intent: "idp:{slug}"
    preview: { title: "{text}", slug: "{slug}" }
    approval: { approvers: [idp-leads], notify: [team-telegram] }
`

// env is the real web server with the Telegram webhook on a real store, its outbox driven
// by hand, and a local Bot API.
type env struct {
	t     *testing.T
	store storage.Store
	svc   *queue.Service
	bot   *telegramtest.Server
	hook  *telegram.Webhook
	notif map[string]queue.Notifier
	url   string
	next  int64 // update ids
	app   *apptest.Env
}

func start(t *testing.T, sqlite bool) *env {
	t.Helper()
	ae := apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Tools: apptest.ParseTools(t, tools, classify.Options{TelegramConfigured: true})})
	e := &env{t: t, store: ae.Store, svc: ae.Service, bot: telegramtest.New(t, botToken), app: ae}
	c, err := telegram.New(telegram.Config{BotToken: botToken, APIURL: e.bot.URL, PublicURL: "https://approvals.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	e.notif = map[string]queue.Notifier{classify.KindTelegram: maintenance.ChannelNotifier[telegram.Message](classify.KindTelegram, c, e.store, nil)}
	if e.hook, err = telegram.NewWebhook(telegram.WebhookConfig{Secret: secret, Client: c, Service: e.svc, Actions: e.store, Prompts: e.store, Staff: e.store}); err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Service: e.svc, Polls: ae.Polls, Store: e.store, Accounts: e.store, TelegramWebhook: e.hook})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e.url = hs.URL + "/integrations/telegram/webhook"
	now := time.Now().UTC()
	for _, u := range []struct {
		email string
		id    int64
		role  accounts.Role
	}{
		{"ann@example.com", ann, accounts.RoleApprover}, {"bob@example.com", bob, accounts.RoleAdmin},
		{"vic@example.com", vic, accounts.RoleViewer}, {"out@example.com", out, accounts.RoleApprover},
	} {
		if _, err := e.store.UserCreate(t.Context(), &accounts.User{Email: u.email, PasswordHash: apptest.PasswordHash(), Role: u.role,
			CreatedAt: now, PasswordChangedAt: now, TelegramID: u.id}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func onBothStores(t *testing.T, test func(t *testing.T, e *env)) {
	for name, sqlite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, start(t, sqlite))
		})
	}
}

func (e *env) submit(tool, slug string) *queue.Action {
	e.t.Helper()
	res, err := e.svc.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: []byte(`{"slug":"` + slug + `","text":"Hello ` + slug + `"}`), Agent: "bot"})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Action
}

// deliver runs the outbox once, as a server's sender loop does each second.
func (e *env) deliver() {
	e.t.Helper()
	outbox := maintenance.NewOutbox(e.svc, e.store, maintenance.OutboxConfig{Notifiers: e.notif})
	if _, err := outbox.FanOut(context.Background(), 100); err != nil {
		e.t.Fatal(err)
	}
	if _, err := outbox.SendDue(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// message delivers the pending action's notification and returns the message it sent.
func (e *env) message(a *queue.Action) telegramtest.Call {
	e.t.Helper()
	e.deliver()
	for _, c := range e.bot.Calls("sendMessage") {
		if strings.Contains(c.Text(), a.IntentKey) {
			return c
		}
	}
	e.t.Fatalf("no message for %s", a.ID)
	return telegramtest.Call{}
}

// press posts user's press of the button with data on msg, with the right secret, and
// returns what the user was told.
func (e *env) press(user int64, msg telegramtest.Call, data string) string {
	e.t.Helper()
	e.next++
	if res := telegramtest.Post(e.t, e.url, secret, telegramtest.Press(e.next, user, chatID, msg.MessageID, data)); res.StatusCode != http.StatusOK {
		e.t.Fatalf("press: %d", res.StatusCode)
	}
	e.hook.Wait()
	answers := e.bot.Calls("answerCallbackQuery")
	last := answers[len(answers)-1]
	if last.Params["callback_query_id"] != "cq-"+itoa(e.next) {
		e.t.Fatalf("answered %v, want the press's query", last.Params["callback_query_id"])
	}
	text, _ := last.Params["text"].(string)
	return text
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func (e *env) action(id string) *queue.Action {
	e.t.Helper()
	a, err := e.store.ActionGetByID(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func lastEvent(t *testing.T, st queue.Reader, id string) queue.Event {
	t.Helper()
	evs, err := queue.Timeline(context.Background(), st, id)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of %s: %v, %d", id, err, len(evs))
	}
	return evs[len(evs)-1]
}

// Approve decides at once, as ann, through the exactly-once path (timeline channel
// telegram), and the message is then edited to say who approved it, without buttons.
func TestTelegramApprove(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		a := e.submit("post_update", "approve")
		msg := e.message(a)
		want := []string{"Approve=approve:" + a.ID, "Reject=reject:" + a.ID, "Open→https://approvals.example.com/actions/" + a.ID}
		if got := msg.Buttons(); !slices.Equal(got, want) {
			t.Fatalf("buttons %v, want %v", got, want)
		}
		if msg.Params["chat_id"] != chatID || msg.Params["parse_mode"] != "HTML" || !strings.Contains(msg.Text(), "Hello approve") {
			t.Fatalf("message %v", msg.Params)
		}
		if told := e.press(ann, msg, "approve:"+a.ID); told != "Approved." {
			t.Fatalf("told %q", told)
		}
		got := e.action(a.ID)
		if got.State != queue.StateApproved || *got.DecidedBy != "user:ann@example.com" {
			t.Fatalf("after Approve: %s by %v", got.State, got.DecidedBy)
		}
		if ev := lastEvent(t, e.store, a.ID); ev.Kind != queue.EventApproved || ev.Channel != "telegram" || !strings.Contains(string(ev.Data), "via Telegram") {
			t.Fatalf("timeline %+v", ev)
		}
		if told := e.press(ann, msg, "approve:"+a.ID); !strings.Contains(told, "approved this action already") {
			t.Fatalf("a second press: told %q", told)
		}
		e.deliver()
		edits := e.bot.Calls("editMessageText")
		if len(edits) != 1 || edits[0].Params["message_id"] != float64(msg.MessageID) || edits[0].Params["reply_markup"] != nil {
			t.Fatalf("edits %+v", edits)
		}
		if text := e.bot.Text(chatID, msg.MessageID); !strings.Contains(text, "<b>Approved</b> by ann@example.com") {
			t.Fatalf("the message says:\n%s", text)
		}
	})
}

// Reject asks for the reason with a force_reply message; the reply decides with it as the
// note, and every message of the action is edited to say so.
func TestTelegramRejectWithReply(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		a := e.submit("post_update", "reject")
		msg := e.message(a)
		if told := e.press(bob, msg, "reject:"+a.ID); !strings.Contains(told, "Reply") {
			t.Fatalf("told %q", told)
		}
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("Reject decided before the reason: %s", got.State)
		}
		sends := e.bot.Calls("sendMessage")
		prompt := sends[len(sends)-1]
		rm, _ := prompt.Params["reply_markup"].(map[string]any)
		if rm["force_reply"] != true || prompt.Params["chat_id"] != chatID || !strings.Contains(prompt.Text(), "tg://user?id=1002") {
			t.Fatalf("prompt %v", prompt.Params)
		}
		// An empty reason decides nothing, and says why.
		e.next++
		telegramtest.Post(t, e.url, secret, e.bot.Reply(e.next, bob, chatID, prompt, "  "))
		e.hook.Wait()
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("an empty reason decided: %s", got.State)
		}
		if last := e.bot.Calls("sendMessage"); !strings.Contains(last[len(last)-1].Text(), "reason is required") {
			t.Fatalf("not told why: %q", last[len(last)-1].Text())
		}
		e.next++
		if res := telegramtest.Post(t, e.url, secret, e.bot.Reply(e.next, bob, chatID, prompt, "Wrong customer <b>")); res.StatusCode != http.StatusOK {
			t.Fatalf("reply: %d", res.StatusCode)
		}
		got := e.action(a.ID)
		if got.State != queue.StateRejected || *got.DecidedBy != "user:bob@example.com" || *got.DecisionNote != "Wrong customer <b>" {
			t.Fatalf("after the reply: %s by %v note %v", got.State, got.DecidedBy, got.DecisionNote)
		}
		if ev := lastEvent(t, e.store, a.ID); ev.Channel != "telegram" {
			t.Fatalf("timeline channel %q", ev.Channel)
		}
		e.deliver()
		if text := e.bot.Text(chatID, msg.MessageID); !strings.Contains(text, "<b>Rejected</b> by bob@example.com") || !strings.Contains(text, "Wrong customer &lt;b&gt;") {
			t.Fatalf("the message says:\n%s", text)
		}
	})
}

// A user who may not decide is told why in the button's answer, and nothing changes: no
// linked account, a viewer, an approver not among the tool's; a quorum counts approvals.
func TestTelegramRefusesWhoMayNotDecide(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		a := e.submit("post_update", "refused")
		msg := e.message(a)
		for _, tc := range []struct {
			user int64
			data string
			want string
		}{
			{stranger, "approve:" + a.ID, "(id 999) is not linked"},
			{vic, "approve:" + a.ID, "has the role viewer"},
			{out, "approve:" + a.ID, "out@example.com is not among the approvers of tool post_update"},
			{out, "reject:" + a.ID, "not among the approvers"},
			{ann, "approve:not-an-id", "not one of approvals'"},
		} {
			if told := e.press(tc.user, msg, tc.data); !strings.Contains(told, tc.want) {
				t.Errorf("user %d %s: told %q, want %q", tc.user, tc.data, told, tc.want)
			}
		}
		if got := e.action(a.ID); got.State != queue.StatePending || len(got.Approvals) != 0 {
			t.Fatalf("a refused user changed the action: %s, %d approvals", got.State, len(got.Approvals))
		}
		if n := len(e.bot.Calls("sendMessage")); n != 1 {
			t.Fatalf("%d messages sent, want only the notification", n)
		}

		q := e.submit("double_check", "quorum")
		qmsg := e.message(q)
		if told := e.press(ann, qmsg, "approve:"+q.ID); told != "Your approval is counted: 1 of 2." {
			t.Fatalf("first of two: told %q", told)
		}
		if told := e.press(bob, qmsg, "approve:"+q.ID); told != "Approved." || e.action(q.ID).State != queue.StateApproved {
			t.Fatalf("second of two: told %q, %s", told, e.action(q.ID).State)
		}
	})
}

// A tools-file group naming an IdP group ("idp:support-leads") decides in
// Telegram as on the dashboard: a member of that IdP group as of their last
// sign-in may approve, an approver outside it is told why and changes
// nothing, and a member the provider later refused may no longer decide.
func TestTelegramIdPGroupDecides(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		now := time.Now().UTC()
		const zoe, yan int64 = 2001, 2002
		for _, p := range []struct {
			email, group string
			id           int64
		}{{"zoe@example.com", "support-leads", zoe}, {"yan@example.com", "staff", yan}} {
			res, err := e.store.UserSSOSignIn(t.Context(), accounts.UserSSOSignInParams{Email: p.email, Subject: "sub-" + p.email,
				Role: accounts.RoleApprover, IdPGroups: []string{p.group}, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.store.UserSetTelegramID(t.Context(), accounts.UserSetTelegramIDParams{ID: res.User.ID, TelegramID: p.id}); err != nil {
				t.Fatal(err)
			}
		}
		a := e.submit("post_idp_update", "idp")
		msg := e.message(a)
		for _, data := range []string{"approve:" + a.ID, "reject:" + a.ID} {
			if told := e.press(yan, msg, data); !strings.Contains(told, "yan@example.com is not among the approvers") {
				t.Fatalf("%s by the outsider: told %q", data, told)
			}
		}
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("after the outsider: %s", got.State)
		}
		if told := e.press(zoe, msg, "approve:"+a.ID); told != "Approved." {
			t.Fatalf("the IdP group's member: told %q", told)
		}
		if got := e.action(a.ID); got.State != queue.StateApproved || *got.DecidedBy != "user:zoe@example.com" {
			t.Fatalf("after the IdP group's member: %s by %v", got.State, got.DecidedBy)
		}
		if _, err := e.store.UserSSODeny(t.Context(), accounts.UserSSODenyParams{Email: "zoe@example.com", Subject: "sub-zoe@example.com",
			IdPGroups: []string{"support-leads"}, Now: now}); err != nil {
			t.Fatal(err)
		}
		b := e.submit("post_idp_update", "idp-2")
		if told := e.press(zoe, e.message(b), "approve:"+b.ID); !strings.Contains(told, "gave no role") {
			t.Fatalf("a denied member: told %q", told)
		}
		if got := e.action(b.ID); got.State != queue.StatePending {
			t.Fatalf("after a denied member pressed approve: %s", got.State)
		}
	})
}

// An update without the secret header, or with another secret, is answered 401 and changes
// nothing: no decision, no answer to Telegram.
func TestTelegramWrongSecret(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		a := e.submit("post_update", "secret")
		msg := e.message(a)
		for _, s := range []string{"", "another-secret", secret + "x"} {
			res := telegramtest.Post(t, e.url, s, telegramtest.Press(1, ann, chatID, msg.MessageID, "approve:"+a.ID))
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("secret %q: %d, want 401", s, res.StatusCode)
			}
		}
		e.hook.Wait()
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("an unauthenticated update decided: %s", got.State)
		}
		if n := len(e.bot.Calls("answerCallbackQuery")); n != 0 {
			t.Fatalf("%d answers to unauthenticated updates", n)
		}
		// With the secret, an update the webhook does not understand is still 200.
		if res := telegramtest.Post(t, e.url, secret, []byte(`{"update_id": 5, "edited_message": {}}`)); res.StatusCode != http.StatusOK {
			t.Fatalf("an update of another kind: %d", res.StatusCode)
		}
		if res := telegramtest.Post(t, e.url, secret, []byte(`not json`)); res.StatusCode != http.StatusOK {
			t.Fatalf("a body that is not JSON: %d", res.StatusCode)
		}
	})
}

// A decision made on the dashboard edits every message sent for the action (the first and
// a reminder's), without buttons; a message whose action was decided while it was on its
// way is edited by its sender.
func TestTelegramEditsAfterDashboardDecision(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		a := e.submit("post_update", "dashboard")
		msg := e.message(a)
		if _, err := e.svc.Decide(context.Background(), queue.DecideRequest{ID: a.ID, To: queue.StateRejected, By: "user:ann@example.com", Note: "not now"}); err != nil {
			t.Fatal(err)
		}
		e.deliver()
		edits := e.bot.Calls("editMessageText")
		if len(edits) != 1 || edits[0].Params["message_id"] != float64(msg.MessageID) || edits[0].Params["chat_id"] != chatID {
			t.Fatalf("edits %+v", edits)
		}
		if text := e.bot.Text(chatID, msg.MessageID); !strings.Contains(text, "<b>Rejected</b> by ann@example.com") || !strings.Contains(text, "not now") {
			t.Fatalf("the message says:\n%s", text)
		}
		// A press on the edited message (a client that had not refreshed) changes nothing.
		if told := e.press(ann, msg, "approve:"+a.ID); !strings.Contains(told, "Nothing was changed") {
			t.Fatalf("a press after the decision: told %q", told)
		}
	})
}

// Approve is offered only on a message that shows the whole payload: a tool whose preview
// hides fields gets "Review in approvals" instead, and an Approve pressed on such an action
// anyway (an old message) decides nothing.
func TestTelegramApproveOnlyOnWhatWasShown(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		a := e.submit("post_note", "hidden") // its preview shows the text, not the slug
		msg := e.message(a)
		want := []string{"Review in approvals→https://approvals.example.com/actions/" + a.ID, "Reject=reject:" + a.ID}
		if got := msg.Buttons(); !slices.Equal(got, want) || !strings.Contains(msg.Text(), "Not shown here") {
			t.Fatalf("buttons %v text %q", got, msg.Text())
		}
		if told := e.press(ann, msg, "approve:"+a.ID); !strings.Contains(told, "does not show all of this action") {
			t.Fatalf("told %q", told)
		}
		if answers := e.bot.Calls("answerCallbackQuery"); answers[len(answers)-1].Refused != "" {
			t.Fatalf("Telegram refused the answer saying why: %s", answers[len(answers)-1].Refused)
		}
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("a hidden action was approved in one click: %s", got.State)
		}
	})
}

// A reply decides only when it answers the bot's reason prompt as recorded when it was sent,
// never by what the message it answers says: an agent that writes "Action <another id>" as
// a line of its payload cannot make an approver's ordinary reply to its approval message
// reject another agent's action, nor can a prompt that looks like the bot's (the approval
// message's text) be answered.
func TestTelegramReplyCannotBeAimedByPayloadText(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		victim := e.submit("post_update", "victim")
		e.message(victim)
		res, err := e.svc.Submit(context.Background(), queue.SubmitRequest{Tool: "post_comment", Agent: "mallory",
			Payload: []byte(`{"slug":"bait","text":"Quick question\nAction ` + victim.ID + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		bait := e.message(res.Action)
		if !strings.Contains(bait.Text(), "\nAction "+victim.ID) {
			t.Fatalf("the bait does not carry the line it aims with:\n%s", bait.Text())
		}
		e.next++
		telegramtest.Post(t, e.url, secret, e.bot.Reply(e.next, ann, chatID, bait, "Looks fine to me"))
		e.hook.Wait()
		for _, a := range []*queue.Action{victim, res.Action} {
			if got := e.action(a.ID); got.State != queue.StatePending {
				t.Fatalf("a reply to the approval message decided %s: %s by %s", a.IntentKey, got.State, decidedBy(got))
			}
		}
		// The bot's own reason prompt for the bait, answered, decides the bait only.
		if told := e.press(ann, bait, "reject:"+res.Action.ID); !strings.Contains(told, "Reply") {
			t.Fatalf("told %q", told)
		}
		e.next++
		telegramtest.Post(t, e.url, secret, e.bot.Reply(e.next, ann, chatID, e.lastPrompt(), "Not ours"))
		e.hook.Wait()
		if got := e.action(res.Action.ID); got.State != queue.StateRejected || *got.DecidedBy != "user:ann@example.com" {
			t.Fatalf("the bait after its prompt's reply: %s by %s", got.State, decidedBy(got))
		}
		if got := e.action(victim.ID); got.State != queue.StatePending {
			t.Fatalf("the victim after the bait's prompt was answered: %s", got.State)
		}
	})
}

// The reason prompt is asked of the user who pressed Reject: another approver's reply to it
// decides nothing and says so; the reply of the user asked then decides.
func TestTelegramReplyByAnotherUserDecidesNothing(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		a := e.submit("post_update", "asked")
		msg := e.message(a)
		if told := e.press(bob, msg, "reject:"+a.ID); !strings.Contains(told, "Reply") {
			t.Fatalf("told %q", told)
		}
		prompt := e.lastPrompt()
		e.next++
		telegramtest.Post(t, e.url, secret, e.bot.Reply(e.next, ann, chatID, prompt, "Ann's reason"))
		e.hook.Wait()
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("a reply by someone not asked decided: %s by %s", got.State, decidedBy(got))
		}
		sends := e.bot.Calls("sendMessage")
		if told := sends[len(sends)-1].Text(); !strings.Contains(told, "Nothing was changed") || !strings.Contains(told, "asked of someone else") {
			t.Fatalf("not told why: %q", told)
		}
		e.next++
		telegramtest.Post(t, e.url, secret, e.bot.Reply(e.next, bob, chatID, prompt, "Bob's reason"))
		e.hook.Wait()
		if got := e.action(a.ID); got.State != queue.StateRejected || *got.DecidedBy != "user:bob@example.com" || *got.DecisionNote != "Bob's reason" {
			t.Fatalf("after the reply of the user asked: %s by %s", got.State, decidedBy(got))
		}
	})
}

// lastPrompt is the last reason prompt the bot sent.
func (e *env) lastPrompt() telegramtest.Call {
	e.t.Helper()
	sends := e.bot.Calls("sendMessage")
	for i := len(sends) - 1; i >= 0; i-- {
		if rm, _ := sends[i].Params["reply_markup"].(map[string]any); rm["force_reply"] == true {
			return sends[i]
		}
	}
	e.t.Fatal("no reason prompt was sent")
	return telegramtest.Call{}
}

// decidedBy is who decided a, or "nobody".
func decidedBy(a *queue.Action) string {
	if a.DecidedBy == nil {
		return "nobody"
	}
	return *a.DecidedBy
}

// failingPrompts records no reason prompt.
type failingPrompts struct{ queue.ReasonPrompts }

func (failingPrompts) ReasonPromptAdd(context.Context, queue.ReasonPrompt) error {
	return errors.New("the database is away")
}

// A reason prompt that cannot be recorded could never decide: it is edited to say so, and a
// reply to it changes nothing.
func TestTelegramPromptNotRecorded(t *testing.T) {
	t.Parallel()
	e := start(t, true)
	c, err := telegram.New(telegram.Config{BotToken: botToken, APIURL: e.bot.URL, PublicURL: "https://approvals.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	hook, err := telegram.NewWebhook(telegram.WebhookConfig{Secret: secret, Client: c, Service: e.svc, Actions: e.store,
		Prompts: failingPrompts{e.store}, Staff: e.store})
	if err != nil {
		t.Fatal(err)
	}
	post := func(update []byte) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/integrations/telegram/webhook", bytes.NewReader(update))
		req.Header.Set(telegram.SecretHeader, secret)
		w := httptest.NewRecorder()
		hook.ServeHTTP(w, req)
		hook.Wait()
		if w.Code != http.StatusOK {
			t.Fatalf("webhook answered %d", w.Code)
		}
	}
	a := e.submit("post_update", "unrecorded")
	msg := e.message(a)
	post(telegramtest.Press(1, bob, chatID, msg.MessageID, "reject:"+a.ID))
	prompt := e.lastPrompt()
	if text := e.bot.Text(chatID, prompt.MessageID); !strings.Contains(text, "could not record this question") {
		t.Fatalf("the unrecorded prompt says:\n%s", text)
	}
	post(e.bot.Reply(2, bob, chatID, prompt, "Too late"))
	if got := e.action(a.ID); got.State != queue.StatePending {
		t.Fatalf("a reply to an unrecorded prompt decided: %s by %s", got.State, decidedBy(got))
	}
}

// Telegram refuses an answerCallbackQuery text over 200 characters (MESSAGE_TOO_LONG), and
// the user would then be told nothing: a long refusal is cut to fit, still saying why. Here a
// message sent before the one-click rules offered Approve on an action whose body a message
// cuts and whose text holds an invisible character.
func TestTelegramLongRefusalStillTold(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		res, err := e.svc.Submit(context.Background(), queue.SubmitRequest{Tool: "post_comment",
			Payload: []byte(`{"slug":"s-1","text":"` + strings.Repeat("long ", 60) + "\u200b" + `"}`), Agent: "bot"})
		if err != nil {
			t.Fatal(err)
		}
		a := res.Action
		told := e.press(ann, e.message(a), "approve:"+a.ID)
		answers := e.bot.Calls("answerCallbackQuery")
		if last := answers[len(answers)-1]; last.Refused != "" || !strings.Contains(told, "does not show all of this action") {
			t.Fatalf("told %q (%d characters), Telegram answered %q", told, len([]rune(told)), last.Refused)
		}
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("state %s", got.State)
		}
	})
}
