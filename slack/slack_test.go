package slack_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/slack"
	"github.com/approvals/approvals/slack/slacktest"
)

const channelID = "C0APPROVALS"

var postedAt = time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)

// newClient is the Slack channel as the outbox drives it, recording its messages in log.
func newClient(t *testing.T, f *slacktest.Server, log *messageLog, token string) queue.Notifier {
	t.Helper()
	return maintenance.ChannelNotifier[slack.Message](classify.KindSlack, newAPI(t, f, token), log, func() time.Time { return postedAt })
}

// newAPI is the Slack client itself.
func newAPI(t *testing.T, f *slacktest.Server, token string) *slack.Client {
	t.Helper()
	c, err := slack.New(slack.Config{BotToken: token, APIURL: f.APIURL(), PublicURL: "https://approvals.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pendingAction() *queue.Action {
	expires := time.Date(2026, 3, 5, 5, 0, 0, 0, time.UTC)
	return &queue.Action{
		ID: "0190a-7", Tool: "send_customer_email", Class: classify.AtMostOnce, IntentKey: "refund:42", Attempt: 1,
		State:       queue.StatePending,
		Payload:     json.RawMessage(`{"to":"c@example.com","subject":"Refund <!channel> & more","body":"Dear customer"}`),
		RequestedBy: "agent:support-bot", CreatedAt: postedAt.Add(-time.Minute), ExpiresAt: &expires,
		Spec: classify.Tool{Name: "send_customer_email", Preview: map[string]string{"title": "{subject}", "to": "{to}", "body": "{body}"}},
	}
}

func decided(a *queue.Action, state queue.State, by, note string) *queue.Action {
	d := *a
	at := time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)
	d.State, d.DecidedBy, d.DecidedAt = state, &by, &at
	if note != "" {
		d.DecisionNote = &note
	}
	return &d
}

func notification(id, event string, a *queue.Action) queue.Notification {
	return queue.Notification{
		ID: id, Type: event, Action: a, OccurredAt: postedAt, Attempt: 1,
		Channel: classify.Channel{Name: "support-slack", Slack: &classify.SlackChannel{Channel: channelID}},
	}
}

// A pending action is posted with the bot token, a fallback text, its preview (escaped), a
// link to its page and the three buttons carrying its id; the returned ts is recorded.
func TestPendingPostsMessageWithButtons(t *testing.T) {
	t.Parallel()
	f, log := slacktest.New(t, botToken), &messageLog{}
	a := pendingAction()
	if err := newClient(t, f, log, botToken).Notify(context.Background(), notification("n1", classify.EventActionPending, a)); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	posts := f.Calls("chat.postMessage")
	if len(posts) != 1 {
		t.Fatalf("%d chat.postMessage calls, want 1", len(posts))
	}
	p := posts[0]
	if p.Auth != "Bearer "+botToken {
		t.Fatalf("Authorization %q", p.Auth)
	}
	if p.Form.Get("channel") != channelID {
		t.Fatalf("channel %q", p.Form.Get("channel"))
	}
	if text := p.Form.Get("text"); text != "Approval needed: send_customer_email: Refund &lt;!channel&gt; &amp; more" {
		t.Fatalf("fallback text %q", text)
	}
	want := []string{"approve=" + a.ID, "reject=" + a.ID, "request_changes=" + a.ID}
	if got := buttons(p.Blocks()); !slices.Equal(got, want) {
		t.Fatalf("buttons %v, want %v", got, want)
	}
	text := blockText(p.Blocks())
	for _, s := range []string{"Refund &lt;!channel&gt; &amp; more", "<https://approvals.example.com/actions/0190a-7|", "*to*\n>c@example.com", "refund:42", "agent:support-bot"} {
		if !strings.Contains(text, s) {
			t.Errorf("blocks lack %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "<!channel>") {
		t.Errorf("payload text reaches Slack unescaped (a channel-wide mention):\n%s", text)
	}
	got := log.all()
	if len(got) != 1 || got[0] != (queue.ChannelMessage{ActionID: a.ID, Kind: classify.KindSlack, Address: channelID, Ref: got[0].Ref, SentAt: postedAt}) || got[0].Ref == "" {
		t.Fatalf("recorded %+v, want the posted message", got)
	}
}

// An action decided before its pending notification went out is posted in its decided form:
// no buttons to press in vain.
func TestNoLongerPendingPostsDecidedForm(t *testing.T) {
	t.Parallel()
	f, log := slacktest.New(t, botToken), &messageLog{}
	a := decided(pendingAction(), queue.StateRejected, "user:ann@example.com", "wrong customer")
	if err := newClient(t, f, log, botToken).Notify(context.Background(), notification("n1", classify.EventActionPending, a)); err != nil {
		t.Fatal(err)
	}
	p := f.Calls("chat.postMessage")[0]
	if b := buttons(p.Blocks()); len(b) != 0 {
		t.Fatalf("decided action posted with buttons %v", b)
	}
	if text := blockText(p.Blocks()); !strings.Contains(text, "*Rejected* by ann@example.com") || !strings.Contains(text, "wrong customer") {
		t.Fatalf("decided form does not say who rejected and why:\n%s", text)
	}
	if len(log.all()) != 1 {
		t.Fatal("the decided form is not recorded: a later outcome could not update it")
	}
}

// A decision's note is cut as it is sent, escaped: a note of 1500 "&" is 7500 characters
// escaped, past Slack's 3000 a section, and Slack would refuse the message (invalid_blocks),
// leaving the old buttons in place.
func TestLongEscapedNoteFits(t *testing.T) {
	t.Parallel()
	f, log := slacktest.New(t, botToken), &messageLog{}
	a := decided(pendingAction(), queue.StateRejected, "user:ann@example.com", strings.Repeat("&", 1500))
	if err := newClient(t, f, log, botToken).Notify(context.Background(), notification("n1", classify.EventActionPending, a)); err != nil {
		t.Fatal(err)
	}
	if text := blockText(f.Calls("chat.postMessage")[0].Blocks()); !strings.Contains(text, "UTC>\n>&amp;&amp;") {
		t.Fatalf("decided form does not say who rejected and why:\n%s", text)
	}
}

// A decision rewrites every message posted to the channel for the action (the first post and
// a reminder), without buttons, saying who decided what; other channels' messages are theirs
// to update.
func TestDecisionUpdatesEveryMessage(t *testing.T) {
	t.Parallel()
	f, log := slacktest.New(t, botToken), &messageLog{}
	c := newClient(t, f, log, botToken)
	a := pendingAction()
	ctx := context.Background()
	for i, ev := range []string{classify.EventActionPending, classify.EventActionReminder} {
		if err := c.Notify(ctx, notification("n"+string(rune('1'+i)), ev, a)); err != nil {
			t.Fatal(err)
		}
	}
	if reminder := f.Calls("chat.postMessage")[1]; !strings.Contains(reminder.Form.Get("text"), "Reminder") || len(buttons(reminder.Blocks())) != 3 {
		t.Fatalf("reminder text %q buttons %v", reminder.Form.Get("text"), buttons(reminder.Blocks()))
	}
	_ = log.ChannelMessageAdd(ctx, queue.ChannelMessage{ActionID: a.ID, Kind: classify.KindSlack, Address: "C0OTHER", Ref: "1.0"})

	approved := decided(a, queue.StateApproved, "user:ann@example.com", "")
	if err := c.Notify(ctx, notification("n3", classify.EventActionApproved, approved)); err != nil {
		t.Fatalf("Notify approved: %v", err)
	}
	updates := f.Calls("chat.update")
	var ts []string
	for _, u := range updates {
		ts = append(ts, u.Form.Get("channel")+"/"+u.Form.Get("ts"))
		if u.Auth != "Bearer "+botToken {
			t.Fatalf("chat.update Authorization %q", u.Auth)
		}
		if b := buttons(u.Blocks()); len(b) != 0 {
			t.Fatalf("updated message keeps buttons %v", b)
		}
		if text := blockText(u.Blocks()); !strings.Contains(text, "*Approved* by ann@example.com") {
			t.Fatalf("update does not say who approved:\n%s", text)
		}
		if !strings.Contains(u.Form.Get("text"), "approved (decided by ann@example.com)") {
			t.Fatalf("update fallback text %q", u.Form.Get("text"))
		}
	}
	var want []string
	for _, m := range log.all()[:2] {
		want = append(want, m.Address+"/"+m.Ref)
	}
	if !slices.Equal(ts, want) {
		t.Fatalf("updated %v, want exactly the channel's messages %v", ts, want)
	}
	if n := len(f.Calls("chat.postMessage")); n != 2 {
		t.Fatalf("a decision with messages to update posted anew (%d posts)", n)
	}

	// The outcome later rewrites them again.
	done := *approved
	done.State = queue.StateDone
	if err := c.Notify(ctx, notification("n4", classify.EventActionDone, &done)); err != nil {
		t.Fatal(err)
	}
	last := f.Calls("chat.update")
	if len(last) != 4 || !strings.Contains(blockText(last[3].Blocks()), "*done*") {
		t.Fatalf("done did not update both messages: %d updates", len(last))
	}
}

// A channel that hears only of decisions has no message to update: it gets the decided form.
func TestDecisionWithoutMessagePostsDecidedForm(t *testing.T) {
	t.Parallel()
	f, log := slacktest.New(t, botToken), &messageLog{}
	a := decided(pendingAction(), queue.StateExpired, "system", "")
	if err := newClient(t, f, log, botToken).Notify(context.Background(), notification("n1", classify.EventActionExpired, a)); err != nil {
		t.Fatal(err)
	}
	posts := f.Calls("chat.postMessage")
	if len(posts) != 1 || len(buttons(posts[0].Blocks())) != 0 || !strings.Contains(blockText(posts[0].Blocks()), "*Expired*") {
		t.Fatalf("posts %d, want one expired message without buttons", len(posts))
	}
	if len(f.Calls("chat.update")) != 0 {
		t.Fatal("updated a message that does not exist")
	}
}

// Slack's refusals are errors to retry, a 429 with its Retry-After, and nothing is recorded
// for a message that was not posted.
func TestSlackFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		method string
		fail   slacktest.Failure
		token  string
		want   string
		after  time.Duration
	}{
		{name: "post ok false", method: "chat.postMessage", fail: slacktest.Failure{Body: `{"ok":false,"error":"channel_not_found"}`}, want: "channel_not_found"},
		{name: "post ok false without error text", method: "chat.postMessage", fail: slacktest.Failure{Body: `{"ok":false}`}, want: "without ok"},
		{name: "post 429", method: "chat.postMessage", fail: slacktest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "30"}, want: "rate limited", after: 30 * time.Second},
		{name: "post 500", method: "chat.postMessage", fail: slacktest.Failure{Status: http.StatusInternalServerError, Body: "<html>"}, want: "500"},
		{name: "wrong token", token: "xoxb-wrong", want: "not_authed"},
		{name: "update ok false", method: "chat.update", fail: slacktest.Failure{Body: `{"ok":false,"error":"message_not_found"}`}, want: "message_not_found"},
		{name: "update 429", method: "chat.update", fail: slacktest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "7"}, want: "rate limited", after: 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, log := slacktest.New(t, botToken), &messageLog{}
			token := botToken
			if tc.token != "" {
				token = tc.token
			}
			c := newClient(t, f, log, token)
			a := pendingAction()
			n := notification("n1", classify.EventActionPending, a)
			if tc.method == "chat.update" {
				_ = log.ChannelMessageAdd(context.Background(), queue.ChannelMessage{ActionID: a.ID, Kind: classify.KindSlack, Address: channelID, Ref: "1.5"})
				n = notification("n2", classify.EventActionRejected, decided(a, queue.StateRejected, "user:bob@example.com", "no"))
			}
			if tc.method != "" {
				f.FailNext(tc.method, tc.fail)
			}
			before := len(log.all())
			err := c.Notify(context.Background(), n)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			var ra *queue.RetryAfterError
			if got := errors.As(err, &ra); got != (tc.after > 0) || (got && ra.After != tc.after) {
				t.Fatalf("error %#v: RetryAfterError=%v, want after %s", err, got, tc.after)
			}
			if len(log.all()) != before {
				t.Fatal("a failed post was recorded")
			}
		})
	}
}

// The note modal is opened with the interaction's trigger_id, the kind as callback_id, the
// action id as private_metadata and one text input named note.
func TestOpenNoteModal(t *testing.T) {
	t.Parallel()
	f := slacktest.New(t, botToken)
	c := newAPI(t, f, botToken)
	if err := c.OpenNoteModal(context.Background(), "T-1.2.3", slack.ButtonRequestChanges, "0190a-7"); err != nil {
		t.Fatalf("OpenNoteModal: %v", err)
	}
	calls := f.Calls("views.open")
	if len(calls) != 1 || calls[0].Auth != "Bearer "+botToken {
		t.Fatalf("views.open calls %+v", calls)
	}
	var got struct {
		TriggerID string `json:"trigger_id"`
		View      struct {
			Type            string `json:"type"`
			CallbackID      string `json:"callback_id"`
			PrivateMetadata string `json:"private_metadata"`
			Blocks          []struct {
				Type    string `json:"type"`
				BlockID string `json:"block_id"`
				Element struct {
					Type     string `json:"type"`
					ActionID string `json:"action_id"`
				} `json:"element"`
			} `json:"blocks"`
		} `json:"view"`
	}
	raw, _ := json.Marshal(calls[0].JSON)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	v := got.View
	if got.TriggerID != "T-1.2.3" || v.Type != "modal" || v.CallbackID != "request_changes" || v.PrivateMetadata != "0190a-7" {
		t.Fatalf("views.open body %s", raw)
	}
	if len(v.Blocks) != 1 || v.Blocks[0].Type != "input" || v.Blocks[0].BlockID != "note" ||
		v.Blocks[0].Element.Type != "plain_text_input" || v.Blocks[0].Element.ActionID != "note" {
		t.Fatalf("modal blocks %s", raw)
	}

	if err := c.OpenNoteModal(context.Background(), "T-1", "approve", "0190a-7"); err == nil {
		t.Fatal("a modal for approve: want an error")
	}
	f.FailNext("views.open", slacktest.Failure{Body: `{"ok":false,"error":"expired_trigger_id"}`})
	if err := c.OpenNoteModal(context.Background(), "T-1", slack.ButtonReject, "0190a-7"); err == nil || !strings.Contains(err.Error(), "expired_trigger_id") {
		t.Fatalf("views.open ok:false: error %v", err)
	}
}

// An ephemeral reply goes to the response_url, and the bot token does not go with it.
func TestEphemeral(t *testing.T) {
	t.Parallel()
	f := slacktest.New(t, botToken)
	c := newAPI(t, f, botToken)
	if err := c.Ephemeral(context.Background(), f.ResponseURL(), "You may not decide this action."); err != nil {
		t.Fatalf("Ephemeral: %v", err)
	}
	calls := f.Calls("response_url")
	if want := strings.TrimPrefix(f.ResponseURL(), f.URL); len(calls) != 1 || calls[0].Path != want {
		t.Fatalf("response_url calls %+v, want one to %s", calls, want)
	}
	if calls[0].Auth != "" {
		t.Fatalf("the bot token was sent to the response_url: %q", calls[0].Auth)
	}
	if calls[0].JSON["response_type"] != "ephemeral" || calls[0].JSON["text"] != "You may not decide this action." {
		t.Fatalf("response_url body %v", calls[0].JSON)
	}
}

// A message posted with buttons for an action that was decided while it
// was on its way (the decision's update, in another process, found nothing
// recorded) is updated by its poster to the decided form.
func TestPostedWhileDecidedIsUpdated(t *testing.T) {
	t.Parallel()
	f, log := slacktest.New(t, botToken), &messageLog{}
	a := pendingAction()
	log.now = decided(a, queue.StateApproved, "user:ann@example.com", "")
	if err := newClient(t, f, log, botToken).Notify(context.Background(), notification("n1", classify.EventActionPending, a)); err != nil {
		t.Fatal(err)
	}
	posts, updates := f.Calls("chat.postMessage"), f.Calls("chat.update")
	if len(posts) != 1 || len(buttons(posts[0].Blocks())) != 3 {
		t.Fatalf("want one post with the buttons, got %d posts", len(posts))
	}
	if len(updates) != 1 || len(buttons(updates[0].Blocks())) != 0 || !strings.Contains(blockText(updates[0].Blocks()), "Approved") {
		t.Fatalf("the posted message was not updated to the decided form: %d updates", len(updates))
	}
	if updates[0].Form.Get("ts") != log.all()[0].Ref {
		t.Fatalf("updated ts %q, recorded %q", updates[0].Form.Get("ts"), log.all()[0].Ref)
	}
}
