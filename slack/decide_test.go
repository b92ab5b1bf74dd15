package slack_test

import (
	"bytes"
	"context"
	"io"
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
	"github.com/approvals/approvals/slack"
	"github.com/approvals/approvals/slack/slacktest"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/web"
)

const (
	slackBotToken = "xoxb-1-interactions-test"
	slackSecret   = "8f742231b10e8888abcd99yyyzzz85a5"
)

// slackTools routes post_update to the leads, told in two Slack channels,
// double_check to the leads with a quorum of two, and post_note (whose
// preview shows the text only) to the leads.
const slackTools = `
groups:
  leads: [ann@example.com, bob@example.com, vic@example.com]
  idp-leads: ["idp:support-leads"]
channels:
  team-slack: { slack: { channel: C0TEAM } }
  leads-slack: { slack: { channel: C0LEADS } }
tools:
  post_update:
    class: at-most-once
    intent: "post:{slug}"
    preview: { title: "{text}", slug: "{slug}" }
    approval: { approvers: [leads], notify: [team-slack, leads-slack] }
  double_check:
    class: at-most-once
    intent: "check:{slug}"
    preview: { title: "{text}", slug: "{slug}" }
    approval: { approvers: [leads], required: 2, notify: [team-slack] }
`

const slackToolsNote = `
  post_note:
    class: at-most-once
    intent: "note:{slug}"
    preview: { title: "{text}" }
    approval: { approvers: [leads], notify: [team-slack] }
  post_idp_update:
    class: at-most-once
    intent: "idp:{slug}"
    preview: { title: "{text}", slug: "{slug}" }
    approval: { approvers: [idp-leads], notify: [team-slack] }
`

// slackEnv is the real web server with Slack interactions on a real store,
// and a local Slack.
type slackEnv struct {
	t     *testing.T
	store storage.Store
	svc   *queue.Service
	slack *slacktest.Server
	in    *slack.Interactions
	notif map[string]queue.Notifier
	url   string
	app   *apptest.Env
}

func startSlack(t *testing.T, sqlite bool) *slackEnv {
	t.Helper()
	env := apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Tools: apptest.ParseTools(t, slackTools+slackToolsNote, classify.Options{SlackConfigured: true}),
		WaitRecheck: 2 * time.Second})
	st := env.Store
	e := &slackEnv{t: t, store: st, svc: env.Service, slack: slacktest.New(t, slackBotToken), app: env}
	client, err := slack.New(slack.Config{BotToken: slackBotToken, APIURL: e.slack.APIURL(), PublicURL: "https://approvals.example.com",
		Tools: env.Service.Registry})
	if err != nil {
		t.Fatal(err)
	}
	e.notif = map[string]queue.Notifier{classify.KindSlack: maintenance.ChannelNotifier[slack.Message](classify.KindSlack, client, st, nil)}
	if e.in, err = slack.NewInteractions(slack.InteractionsConfig{SigningSecret: slackSecret, Client: client, Service: e.svc, Actions: st, Staff: st}); err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Service: e.svc, Polls: env.Polls, Store: st, Accounts: st, SlackInteractions: e.in})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e.url = hs.URL
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, u := range []struct {
		email, slackID string
		role           accounts.Role
	}{
		{"ann@example.com", "U0ANN", accounts.RoleApprover},
		{"bob@example.com", "U0BOB", accounts.RoleAdmin},
		{"vic@example.com", "U0VIC", accounts.RoleViewer},   // in the group, but may not decide
		{"out@example.com", "U0OUT", accounts.RoleApprover}, // may decide, not in the group
	} {
		created, err := st.UserCreate(t.Context(), &accounts.User{Email: u.email, PasswordHash: apptest.PasswordHash(), Role: u.role, CreatedAt: now, PasswordChangedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.UserSetSlackID(t.Context(), accounts.UserSetSlackIDParams{ID: created.ID, SlackID: u.slackID}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// slackStores runs a test on both stores.
func slackStores(t *testing.T, test func(t *testing.T, e *slackEnv)) {
	for name, sqlite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, startSlack(t, sqlite))
		})
	}
}

func (e *slackEnv) submit(tool, slug string) *queue.Action {
	e.t.Helper()
	res, err := e.svc.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: []byte(`{"slug":"` + slug + `","text":"Hello ` + slug + `"}`), Agent: "bot"})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Action
}

// deliver runs the outbox once: what a server's sender loop does each second.
func (e *slackEnv) deliver() {
	e.t.Helper()
	outbox := maintenance.NewOutbox(e.svc, e.store, maintenance.OutboxConfig{Notifiers: e.notif})
	if _, err := outbox.FanOut(context.Background(), 100); err != nil {
		e.t.Fatal(err)
	}
	if _, err := outbox.SendDue(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// post sends body signed at ts (the zero time: now) and returns the status and body.
func (e *slackEnv) post(body []byte, ts time.Time, secret string) (int, string) {
	e.t.Helper()
	if ts.IsZero() {
		ts = time.Now()
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/integrations/slack/interactions", bytes.NewReader(body))
	req.Header = slacktest.Sign(secret, ts, body)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if d := time.Since(start); d > 3*time.Second {
		e.t.Errorf("answered after %s; Slack gives up after 3 s", d)
	}
	return resp.StatusCode, string(b)
}

func (e *slackEnv) press(user, button, actionID string) (int, string) {
	return e.post(slacktest.ButtonPress(user, button, actionID, e.slack.ResponseURL()), time.Time{}, slackSecret)
}

func (e *slackEnv) action(id string) *queue.Action {
	e.t.Helper()
	a, err := e.store.ActionGetByID(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// ephemerals are the texts of the ephemeral replies sent so far.
func (e *slackEnv) ephemerals() []string {
	e.in.Wait()
	var out []string
	for _, c := range e.slack.Calls("response_url") {
		text, _ := c.JSON["text"].(string)
		if c.JSON["response_type"] != "ephemeral" {
			e.t.Errorf("reply %v is not ephemeral", c.JSON)
		}
		out = append(out, text)
	}
	return out
}

func lastEvent(t *testing.T, st queue.Reader, id string) queue.Event {
	t.Helper()
	evs, err := queue.Timeline(context.Background(), st, id)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of %s: %v, %d", id, err, len(evs))
	}
	return evs[len(evs)-1]
}

// Approving in Slack decides at once, through the exactly-once path (Slack
// retrying the request is a replay), shows in the timeline with channel
// slack, and then every message posted for the action is updated.
func TestSlackApproveUpdatesEveryMessage(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		a := e.submit("post_update", "launch")
		e.deliver()
		posts := e.slack.Calls("chat.postMessage")
		if len(posts) != 2 {
			t.Fatalf("%d messages posted, want one per channel (2)", len(posts))
		}
		if status, body := e.press("U0ANN", "approve", a.ID); status != http.StatusOK || body != "" {
			t.Fatalf("approve: %d %q, want 200 and an empty body", status, body)
		}
		got := e.action(a.ID)
		if got.State != queue.StateApproved || got.DecidedBy == nil || *got.DecidedBy != "user:ann@example.com" {
			t.Fatalf("after approve in Slack: %s by %v", got.State, got.DecidedBy)
		}
		if ev := lastEvent(t, e.store, a.ID); ev.Kind != queue.EventApproved || ev.Channel != "slack" || !strings.Contains(string(ev.Data), "via Slack") {
			t.Fatalf("timeline: %+v, want approved via channel slack with the note", ev)
		}
		// Slack retries a request it got no answer to: the same decision again is a replay.
		if status, _ := e.press("U0ANN", "approve", a.ID); status != http.StatusOK {
			t.Fatalf("repeated approve: %d", status)
		}
		if r := e.ephemerals(); len(r) != 1 || !strings.Contains(r[0], "already") {
			t.Fatalf("replies %q, want one saying the approval was given already", r)
		}
		e.deliver()
		updates := e.slack.Calls("chat.update")
		var updated []string
		for _, u := range updates {
			updated = append(updated, u.Form.Get("channel")+"/"+u.Form.Get("ts"))
			if !strings.Contains(u.Form.Get("text"), "ann@example.com") {
				t.Errorf("update %q does not say who approved", u.Form.Get("text"))
			}
		}
		var want []string
		for _, p := range posts {
			want = append(want, p.Form.Get("channel")+"/")
		}
		if len(updated) != 2 {
			t.Fatalf("updates %v, want both posted messages updated", updated)
		}
		for i, w := range want {
			if !slices.ContainsFunc(updated, func(u string) bool { return strings.HasPrefix(u, w) }) {
				t.Errorf("message %d in %s was not updated (updates %v)", i, w, updated)
			}
		}
	})
}

// Reject and request changes open the modal; its submission decides with
// the note.
func TestSlackNoteModalDecides(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		for i, tc := range []struct {
			button string
			want   queue.State
		}{
			{"reject", queue.StateRejected},
			{"request_changes", queue.StateChangesRequested},
		} {
			a := e.submit("post_update", tc.button)
			if status, _ := e.press("U0BOB", tc.button, a.ID); status != http.StatusOK {
				t.Fatalf("%s: press: %d", tc.button, status)
			}
			opens := e.slack.Calls("views.open")
			if len(opens) != i+1 {
				t.Fatalf("%s: %d views.open calls, want %d", tc.button, len(opens), i+1)
			}
			view, _ := opens[i].JSON["view"].(map[string]any)
			if opens[i].JSON["trigger_id"] != "trigger-"+tc.button || view["callback_id"] != tc.button || view["private_metadata"] != a.ID {
				t.Fatalf("%s: views.open %v", tc.button, opens[i].JSON)
			}
			if got := e.action(a.ID); got.State != queue.StatePending {
				t.Fatalf("%s: opening the modal changed the state to %s", tc.button, got.State)
			}
			// An empty note keeps the modal open with the reason.
			status, body := e.post(slacktest.NoteSubmission("U0BOB", tc.button, a.ID, "  "), time.Time{}, slackSecret)
			if status != http.StatusOK || !strings.Contains(body, `"response_action":"errors"`) {
				t.Fatalf("%s: empty note: %d %s", tc.button, status, body)
			}
			status, body = e.post(slacktest.NoteSubmission("U0BOB", tc.button, a.ID, "Not on a Friday"), time.Time{}, slackSecret)
			if status != http.StatusOK || body != "" {
				t.Fatalf("%s: submit: %d %q, want 200 and an empty body (closes the modal)", tc.button, status, body)
			}
			got := e.action(a.ID)
			if got.State != tc.want || got.DecisionNote == nil || *got.DecisionNote != "Not on a Friday" || *got.DecidedBy != "user:bob@example.com" {
				t.Fatalf("%s: %s, note %v, by %v", tc.button, got.State, got.DecisionNote, got.DecidedBy)
			}
			if ev := lastEvent(t, e.store, a.ID); ev.Channel != "slack" {
				t.Fatalf("%s: timeline channel %q, want slack", tc.button, ev.Channel)
			}
		}
	})
}

// Approve pressed on a message that does not show the whole payload (one
// posted before the rule, say) changes nothing and says what is hidden,
// with the link; rejecting it from Slack still works.
func TestSlackApproveRefusedWhenNotAllShown(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		a := e.submit("post_note", "hidden")
		if status, body := e.press("U0ANN", "approve", a.ID); status != http.StatusOK || body != "" {
			t.Fatalf("approve: %d %q", status, body)
		}
		r := e.ephemerals()
		if len(r) == 0 || !strings.Contains(r[len(r)-1], "1 more field (slug)") || !strings.Contains(r[len(r)-1], "/actions/"+a.ID) {
			t.Fatalf("replies %q, want the last to say what is hidden and link the page", r)
		}
		if got := e.action(a.ID); got.State != queue.StatePending || len(got.Approvals) != 0 {
			t.Fatalf("approve on a message hiding a field: %s, %d approvals", got.State, len(got.Approvals))
		}
	})
}

// Whoever may not decide changes nothing and is told why: an unmapped Slack
// user, a viewer, an approver outside the tool's group; a modal submission
// by such a user keeps the modal open with the reason.
func TestSlackRefusesWhoMayNotDecide(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		a := e.submit("post_update", "refuse")
		for _, tc := range []struct {
			user, button, want string
		}{
			{"U0NOBODY", "approve", "not linked"},
			{"U0VIC", "approve", "only approvers and admins"},
			{"U0OUT", "approve", "not among the approvers"},
			{"U0OUT", "reject", "not among the approvers"},
			{"U0VIC", "request_changes", "only approvers and admins"},
		} {
			if status, body := e.press(tc.user, tc.button, a.ID); status != http.StatusOK || body != "" {
				t.Fatalf("%s %s: %d %q", tc.user, tc.button, status, body)
			}
			r := e.ephemerals()
			if len(r) == 0 || !strings.Contains(r[len(r)-1], tc.want) {
				t.Fatalf("%s %s: replies %q, want the last to say %q", tc.user, tc.button, r, tc.want)
			}
		}
		if n := len(e.slack.Calls("views.open")); n != 0 {
			t.Fatalf("a modal was opened for someone who may not decide (%d)", n)
		}
		status, body := e.post(slacktest.NoteSubmission("U0OUT", "reject", a.ID, "no"), time.Time{}, slackSecret)
		if status != http.StatusOK || !strings.Contains(body, "not among the approvers") {
			t.Fatalf("submission by an outsider: %d %s", status, body)
		}
		if got := e.action(a.ID); got.State != queue.StatePending || len(got.Approvals) != 0 {
			t.Fatalf("refused decisions changed the action: %s, %d approvals", got.State, len(got.Approvals))
		}
	})
}

// A tool whose approvers are an identity provider group: in Slack, as on
// the dashboard, its members (as of their last single sign-on) decide,
// others are told they are not among the approvers, and someone the
// provider has refused since decides nothing.
func TestSlackIdPGroupDecides(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		now := time.Now().UTC()
		for _, p := range []struct{ email, slackID, group string }{
			{"zoe@example.com", "U0ZOE", "support-leads"},
			{"yan@example.com", "U0YAN", "staff"},
		} {
			res, err := e.store.UserSSOSignIn(t.Context(), accounts.UserSSOSignInParams{Email: p.email, Subject: "sub-" + p.email,
				Role: accounts.RoleApprover, IdPGroups: []string{p.group}, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.store.UserSetSlackID(t.Context(), accounts.UserSetSlackIDParams{ID: res.User.ID, SlackID: p.slackID}); err != nil {
				t.Fatal(err)
			}
		}
		a := e.submit("post_idp_update", "idp")
		for _, button := range []string{"approve", "reject"} {
			e.press("U0YAN", button, a.ID)
			if r := e.ephemerals(); len(r) == 0 || !strings.Contains(r[len(r)-1], "yan@example.com is not among the approvers") {
				t.Fatalf("%s by the outsider: replies %q", button, r)
			}
		}
		if n := len(e.slack.Calls("views.open")); n != 0 {
			t.Fatalf("a modal was opened for someone outside the IdP group (%d)", n)
		}
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("after the outsider: %s", got.State)
		}
		e.press("U0ZOE", "approve", a.ID)
		if got := e.action(a.ID); got.State != queue.StateApproved || *got.DecidedBy != "user:zoe@example.com" {
			t.Fatalf("after the IdP group's member: %s by %v", got.State, got.DecidedBy)
		}
		// Refused by the provider at a later sign-in: nothing more.
		if _, err := e.store.UserSSODeny(t.Context(), accounts.UserSSODenyParams{Email: "zoe@example.com", Subject: "sub-zoe@example.com",
			IdPGroups: []string{"support-leads"}, Now: now}); err != nil {
			t.Fatal(err)
		}
		b := e.submit("post_idp_update", "idp-2")
		e.press("U0ZOE", "approve", b.ID)
		if r := e.ephemerals(); !strings.Contains(r[len(r)-1], "gave no role") {
			t.Fatalf("a denied member: replies %q", r)
		}
		if got := e.action(b.ID); got.State != queue.StatePending {
			t.Fatalf("after a denied member pressed approve: %s", got.State)
		}
	})
}

// Under a quorum an approval from Slack is counted and the user is told how
// many are still needed.
func TestSlackApproveCountsTowardsQuorum(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		a := e.submit("double_check", "q")
		e.press("U0ANN", "approve", a.ID)
		if r := e.ephemerals(); len(r) != 1 || !strings.Contains(r[0], "1 of 2") {
			t.Fatalf("replies %q, want one saying 1 of 2", r)
		}
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("one of two approvals: %s", got.State)
		}
		e.press("U0BOB", "approve", a.ID)
		if got := e.action(a.ID); got.State != queue.StateApproved || len(got.Approvals) != 2 {
			t.Fatalf("two of two approvals: %s with %d", got.State, len(got.Approvals))
		}
	})
}

// A request not signed by Slack under our secret, or signed too long ago
// (a replay), is 401 and changes nothing; it needs no CSRF token when it is
// signed, and none helps when it is not.
func TestSlackRefusesUnsignedRequests(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		a := e.submit("post_update", "unsigned")
		body := slacktest.ButtonPress("U0ANN", "approve", a.ID, e.slack.ResponseURL())
		for _, tc := range []struct {
			name   string
			ts     time.Time
			secret string
		}{
			{"other secret", time.Time{}, "not-the-signing-secret"},
			{"stale timestamp", time.Now().Add(-6 * time.Minute), slackSecret},
			{"future timestamp", time.Now().Add(6 * time.Minute), slackSecret},
		} {
			if status, _ := e.post(body, tc.ts, tc.secret); status != http.StatusUnauthorized {
				t.Fatalf("%s: status %d, want 401", tc.name, status)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, e.url+"/integrations/slack/interactions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no signature: %d, want 401", resp.StatusCode)
		}
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("an unverified request changed the action to %s", got.State)
		}
		if r := e.ephemerals(); len(r) != 0 {
			t.Fatalf("an unverified request was answered in Slack: %q", r)
		}
		// Malformed but signed: 200 like every request Slack signed (a
		// 4xx would make Slack show the user an error), nothing changes.
		if status, body := e.post([]byte("payload=%7Bnot json"), time.Time{}, slackSecret); status != http.StatusOK {
			t.Fatalf("malformed payload: %d %s", status, body)
		}
		if got := e.action(a.ID); got.State != queue.StatePending {
			t.Fatalf("a malformed request changed the action to %s", got.State)
		}
	})
}

// With APPROVALS_SLACK_TEAM_ID or APPROVALS_SLACK_APP_ID set, a signed
// interaction from another workspace or app is answered 200 and decides
// nothing; one from the configured workspace and app decides.
func TestSlackInteractionFromAnotherWorkspaceChangesNothing(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		client, err := slack.New(slack.Config{BotToken: slackBotToken, APIURL: e.slack.APIURL(), PublicURL: "https://approvals.example.com"})
		if err != nil {
			t.Fatal(err)
		}
		a := e.submit("post_update", "workspace")
		press := func(team, app string) int {
			in, err := slack.NewInteractions(slack.InteractionsConfig{SigningSecret: slackSecret, TeamID: team, AppID: app,
				Client: client, Service: e.svc, Actions: e.store, Staff: e.store})
			if err != nil {
				t.Fatal(err)
			}
			body := slacktest.ButtonPress("U0ANN", "approve", a.ID, e.slack.ResponseURL())
			req := httptest.NewRequest(http.MethodPost, "/integrations/slack/interactions", bytes.NewReader(body))
			req.Header = slacktest.Sign(slackSecret, time.Now(), body)
			rec := httptest.NewRecorder()
			in.ServeHTTP(rec, req)
			in.Wait()
			return rec.Code
		}
		for _, tc := range [][2]string{{"T0OTHER", ""}, {"", "A0OTHER"}, {slacktest.TeamID, "A0OTHER"}} {
			if code := press(tc[0], tc[1]); code != http.StatusOK {
				t.Fatalf("team %q app %q: %d, want 200", tc[0], tc[1], code)
			}
			if got := e.action(a.ID); got.State != queue.StatePending || len(got.Approvals) != 0 {
				t.Fatalf("an interaction from elsewhere (want team %q app %q) decided: %s", tc[0], tc[1], got.State)
			}
		}
		if code := press(slacktest.TeamID, slacktest.AppID); code != http.StatusOK {
			t.Fatalf("from the configured workspace: %d", code)
		}
		if got := e.action(a.ID); got.State != queue.StateApproved {
			t.Fatalf("from the configured workspace and app: %s, want approved", got.State)
		}
	})
}
