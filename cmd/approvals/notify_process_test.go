package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/slack/slacktest"
)

// These tests run the real binary as separate processes on one PostgreSQL
// database and check that every notification reaches its channel: a
// webhook receiver, a real SMTP server, a local Slack.

// eventReceiver is a webhook channel's receiver. It verifies each event's
// Standard Webhooks signature and counts deliveries by webhook-id (the
// notification id). While fail is set it answers 500; with hold set it
// keeps the request open until the connection dies.
type eventReceiver struct {
	srv     *httptest.Server
	arrived chan string // webhook-ids, in order of arrival

	mu    sync.Mutex
	hits  map[string]int
	types map[string]string // webhook-id → event type
	fail  int               // answer 500 this many more times
	hold  bool
	bad   []string
}

func newEventReceiver(t *testing.T) *eventReceiver {
	t.Helper()
	r := &eventReceiver{arrived: make(chan string, 1000), hits: map[string]int{}, types: map[string]string{}}
	verifier, err := standardwebhooks.NewWebhook(eventsSecret)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id := req.Header.Get("webhook-id")
		var ev struct{ ID, Type string }
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		if err := verifier.Verify(body, req.Header); err != nil {
			r.bad = append(r.bad, "event "+id+": signature refused: "+err.Error())
		}
		if ev.ID != id {
			r.bad = append(r.bad, fmt.Sprintf("event id %q, webhook-id %q", ev.ID, id))
		}
		r.hits[id]++
		r.types[id] = ev.Type
		failing, hold := r.fail > 0, r.hold
		if failing {
			r.fail--
		}
		r.mu.Unlock()
		r.arrived <- id
		switch {
		case hold:
			<-req.Context().Done()
		case failing:
			http.Error(w, "receiver down", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, b := range r.bad {
			t.Error(b)
		}
	})
	return r
}

func (r *eventReceiver) set(fn func(r *eventReceiver)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(r)
}

func (r *eventReceiver) snapshot() (hits map[string]int, types map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hits, types = map[string]int{}, map[string]string{}
	for k, v := range r.hits {
		hits[k], types[k] = v, r.types[k]
	}
	return hits, types
}

// next waits for the next arrival.
func (r *eventReceiver) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-r.arrived:
		return id
	case <-time.After(30 * time.Second):
		t.Fatal("no event arrived within 30s")
		return ""
	}
}

// notifyDeployment is a deployment whose tools file is tools (with the
// test's channels), whose environment adds env, and whose Domain (a
// process with no sender) submits and reads with the same tools.
func notifyDeployment(t *testing.T, bin, tools string, env ...string) *apptest.Deployment {
	t.Helper()
	reg := apptest.ParseTools(t, tools, classify.Options{WebhookSecretSet: true, SlackConfigured: true, SMTPConfigured: true, TelegramConfigured: true})
	return apptest.NewDeployment(t, bin, apptest.DeploymentOptions{Tools: tools, DomainTools: reg,
		Env: append([]string{"APPROVALS_SWEEP_INTERVAL=200ms", "APPROVALS_WEBHOOK_SECRET=" + processSecret,
			"APPROVALS_PUBLIC_URL=https://approvals.example.com"}, env...)})
}

func webhookTools(hook string) string {
	return fmt.Sprintf(`
channels:
  ops-hook: { webhook: %q, secret: %q }
tools:
  post_update:
    class: at-most-once
    intent: "post:{slug}"
    approval: { notify: [ops-hook] }
`, hook, eventsSecret)
}

// eventsSecret signs the webhook channel's events: never the executions' key
// (processSecret, APPROVALS_WEBHOOK_SECRET).
const eventsSecret = "whsec_ZXZlbnRzIGtleSwgbm90IHRoZSBleGVjdXRpb25zJw=="

// notifications reads an action's notifications as stored.
func notifications(d *apptest.Deployment, id string) []queue.NotificationRecord {
	d.T.Helper()
	list, err := d.Domain().Store.NotificationList(context.Background(), id)
	if err != nil {
		d.T.Fatal(err)
	}
	return list
}

func TestServerProcessNotifications(t *testing.T) {
	t.Parallel()
	pgtest.BaseURL(t)
	bin := apptest.BuildBinary(t)

	// Two processes share the outbox: every notification arrives, none is
	// lost, and healthy processes send none twice.
	t.Run("two processes deliver each notification once", func(t *testing.T) {
		t.Parallel()
		rcv := newEventReceiver(t)
		d := notifyDeployment(t, bin, webhookTools(rcv.srv.URL))
		servers := []*apptest.Process{d.Start(), d.Start()}
		const n = 30
		for i := range n {
			d.Submit(servers[i%2], "post_update", map[string]any{"slug": fmt.Sprintf("s-%d", i)})
		}
		seen := map[string]bool{}
		for len(seen) < n {
			seen[rcv.next(t)] = true
		}
		hits, types := rcv.snapshot()
		for id, c := range hits {
			if c != 1 || types[id] != "action.pending" {
				t.Errorf("notification %s (%s) arrived %d times", id, types[id], c)
			}
		}
		if len(hits) != n {
			t.Fatalf("%d notifications arrived, want %d", len(hits), n)
		}
	})

	// A process killed while it sends a notification (committed, claimed,
	// not yet acknowledged) loses nothing: after a restart the notification
	// arrives again once the dead sender's lease runs out. And one
	// committed while no server ran at all is sent when one starts.
	t.Run("SIGKILL between commit and send, restart", func(t *testing.T) {
		t.Parallel()
		rcv := newEventReceiver(t)
		rcv.set(func(r *eventReceiver) { r.hold = true })
		d := notifyDeployment(t, bin, webhookTools(rcv.srv.URL), "APPROVALS_OUTBOX_LEASE=4s")
		first := d.Start()
		a := d.Submit(first, "post_update", map[string]any{"slug": "crash"})
		held := rcv.next(t) // the sender is inside its request
		if err := first.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-first.Exited
		if ns := notifications(d, a.ID); len(ns) != 1 || ns[0].State != queue.NotificationPending || ns[0].ID != held {
			t.Fatalf("after the kill: %+v", ns)
		}
		// Committed with no server running: only the outbox row knows.
		offline, err := d.Domain().Service.Submit(context.Background(), queue.SubmitRequest{Tool: "post_update", Payload: []byte(`{"slug":"offline"}`), Agent: "bot"})
		if err != nil {
			t.Fatal(err)
		}
		rcv.set(func(r *eventReceiver) { r.hold = false })
		d.Start()
		got := map[string]bool{}
		for !got[held] || len(got) < 2 {
			got[rcv.next(t)] = true
		}
		hits, _ := rcv.snapshot()
		if hits[held] < 2 {
			t.Fatalf("the notification cut off by the kill arrived %d times, want again after the restart", hits[held])
		}
		for _, id := range []string{a.ID, offline.Action.ID} {
			waitNotificationState(t, d, id, queue.NotificationDelivered)
		}
	})

	// A receiver answering 500 is retried with backoff; the failure shows
	// on the action page (attempts, last error) and in /metrics, and the
	// notification is delivered once the receiver recovers.
	t.Run("failing webhook is retried and visible", func(t *testing.T) {
		t.Parallel()
		rcv := newEventReceiver(t)
		rcv.set(func(r *eventReceiver) { r.fail = 1 })
		d := notifyDeployment(t, bin, webhookTools(rcv.srv.URL))
		s := d.Start()
		a := d.Submit(s, "post_update", map[string]any{"slug": "flaky"})
		first := rcv.next(t)
		n := waitNotification(t, d, a.ID, func(r queue.NotificationRecord) bool { return r.Attempts == 1 && r.LastError != "" })
		if n.ID != first || n.State != queue.NotificationPending || !n.DueAt.After(n.CreatedAt) {
			t.Fatalf("after a 500: %+v", n)
		}
		d.Command("correct horse battery staple\n", "user", "add", "--email", "ann@example.com", "--role", "approver")
		ann := loginDashboard(t, s.URL, "ann@example.com", "correct horse battery staple")
		res, err := ann.client.Get(s.URL + "/actions/" + a.ID)
		if err != nil {
			t.Fatal(err)
		}
		page := readBody(res)
		for _, want := range []string{"ops-hook", "action.pending", "500 Internal Server Error", "next try"} {
			if !strings.Contains(page, want) {
				t.Fatalf("action page lacks %q:\n%s", want, grep(page, "notification"))
			}
		}
		waitMetrics(t, s.URL, "after the failure",
			`approvals_notifications_total{channel="webhook",outcome="retry"} 1`,
			"approvals_notifications_queued 1")
		if again := rcv.next(t); again != first {
			t.Fatalf("retry delivered %s, want %s", again, first)
		}
		waitNotificationState(t, d, a.ID, queue.NotificationDelivered)
		waitMetrics(t, s.URL, "after the recovery",
			`approvals_notifications_total{channel="webhook",outcome="delivered"} 1`,
			"approvals_notifications_queued 0")
	})

	// Email goes through a real SMTP server, with the link to the action
	// page on the public URL.
	t.Run("email through SMTP", func(t *testing.T) {
		t.Parallel()
		mail := startSMTP(t)
		d := notifyDeployment(t, bin, `
channels:
  leads-mail: { email: { to: [leads@example.com] } }
tools:
  post_update:
    class: at-most-once
    intent: "post:{slug}"
    preview: { title: "Update {slug}" }
    approval: { notify: [leads-mail] }
`, "APPROVALS_SMTP_URL=smtp://"+mail.addr, "APPROVALS_SMTP_FROM=approvals@example.com")
		s := d.Start()
		a := d.Submit(s, "post_update", map[string]any{"slug": "mailed"})
		m := mail.next(t)
		if m.from != "approvals@example.com" || len(m.to) != 1 || m.to[0] != "leads@example.com" {
			t.Fatalf("envelope from %q to %v", m.from, m.to)
		}
		for _, want := range []string{"Update mailed", "https://approvals.example.com/actions/" + a.ID, "<notification-"} {
			if !strings.Contains(m.data, want) {
				t.Fatalf("message lacks %q:\n%s", want, m.data)
			}
		}
		waitNotificationState(t, d, a.ID, queue.NotificationDelivered)
	})

	// Slack: the message is posted with the bot token; a decision made in
	// Slack (a signed interaction sent to the process) approves the action
	// and the posted message is updated. A first post refused with
	// ok:false and then 429 is retried, honouring Retry-After.
	t.Run("Slack post, retry, decide and update", func(t *testing.T) {
		t.Parallel()
		const token, secret = "xoxb-process-test", "process-signing-secret"
		sl := slacktest.New(t, token)
		sl.FailNext("chat.postMessage", slacktest.Failure{Body: `{"ok":false,"error":"channel_not_found"}`},
			slacktest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "1"})
		d := notifyDeployment(t, bin, `
groups:
  leads: [ann@example.com]
channels:
  team-slack: { slack: { channel: C0TEAM } }
tools:
  post_update:
    class: at-most-once
    intent: "post:{slug}"
    preview: { title: "Update {slug}" }
    approval: { approvers: [leads], notify: [team-slack] }
`, "APPROVALS_SLACK_BOT_TOKEN="+token, "APPROVALS_SLACK_SIGNING_SECRET="+secret, "APPROVALS_SLACK_API_URL="+sl.APIURL())
		d.Command("correct horse battery staple\n", "user", "add", "--email", "ann@example.com", "--role", "approver", "--slack-id", "U0ANN")
		s := d.Start()
		a := d.Submit(s, "post_update", map[string]any{"slug": "slacked"})
		posts := sl.WaitFor(t, "chat.postMessage", 3, 30*time.Second)
		if posts[2].Auth != "Bearer "+token || posts[2].Form.Get("channel") != "C0TEAM" {
			t.Fatalf("post: %+v", posts[2])
		}
		metrics := get(t, s.URL+"/metrics")
		if !strings.Contains(metrics, `approvals_notifications_total{channel="slack",outcome="retry"} 2`) {
			t.Fatalf("metrics:\n%s", grep(metrics, "approvals_notifications"))
		}
		waitNotificationState(t, d, a.ID, queue.NotificationDelivered)

		body := slacktest.ButtonPress("U0ANN", "approve", a.ID, sl.ResponseURL())
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/integrations/slack/interactions", bytes.NewReader(body))
		req.Header = slacktest.Sign(secret, time.Now(), body)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("interaction: %d %s", res.StatusCode, readBody(res))
		}
		res.Body.Close()
		if got := d.Action(a.ID); got.State != queue.StateApproved || *got.DecidedBy != "user:ann@example.com" {
			t.Fatalf("after approve in Slack: %s by %v", got.State, got.DecidedBy)
		}
		up := sl.WaitFor(t, "chat.update", 1, 30*time.Second)[0]
		if up.Form.Get("ts") == "" || up.Form.Get("channel") != "C0TEAM" {
			t.Fatalf("update: %v", up.Form)
		}
		if !strings.Contains(up.Form.Get("text"), "ann@example.com") {
			t.Fatalf("update %q does not name who approved", up.Form.Get("text"))
		}
	})
}

func waitNotification(t *testing.T, d *apptest.Deployment, actionID string, ok func(queue.NotificationRecord) bool) queue.NotificationRecord {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, n := range notifications(d, actionID) {
			if ok(n) {
				return n
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("notifications of %s: %+v", actionID, notifications(d, actionID))
		}
		// The state is in the database, written by another process: read
		// it again shortly.
		time.Sleep(50 * time.Millisecond)
	}
}

// waitMetrics waits until /metrics shows every line in want. The sender
// counts an attempt after its outcome is committed, so a test that sees the
// new state in the database may read /metrics a moment before the counter
// moves; a counter that never moves fails after the deadline.
func waitMetrics(t *testing.T, base, when string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		metrics := get(t, base+"/metrics")
		missing := ""
		for _, w := range want {
			if !strings.Contains(metrics, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics %s lack %q:\n%s", when, missing, grep(metrics, "approvals_notifications"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitNotificationState(t *testing.T, d *apptest.Deployment, actionID string, state queue.NotificationState) {
	t.Helper()
	waitNotification(t, d, actionID, func(n queue.NotificationRecord) bool { return n.State == state })
}

// smtpServer is a real SMTP server (go-smtp) that keeps what it receives.
type smtpServer struct {
	addr string
	got  chan mailMsg
}

type mailMsg struct {
	from string
	to   []string
	data string
}

type smtpSession struct {
	s   *smtpServer
	msg mailMsg
}

func (se *smtpSession) Mail(from string, _ *smtp.MailOptions) error { se.msg.from = from; return nil }
func (se *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	se.msg.to = append(se.msg.to, to)
	return nil
}
func (se *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	// Undo quoted-printable's soft line breaks, so that the tests can find
	// a long link whole.
	se.msg.data = strings.NewReplacer("=\r\n", "", "=\n", "", "=3D", "=").Replace(string(b))
	se.s.got <- se.msg
	return nil
}
func (se *smtpSession) Reset()        { se.msg = mailMsg{} }
func (se *smtpSession) Logout() error { return nil }

func startSMTP(t *testing.T) *smtpServer {
	t.Helper()
	m := &smtpServer{got: make(chan mailMsg, 100)}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &smtpSession{s: m}, nil }))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return m
}

func (m *smtpServer) next(t *testing.T) mailMsg {
	t.Helper()
	select {
	case msg := <-m.got:
		return msg
	case <-time.After(30 * time.Second):
		t.Fatal("no mail within 30s")
		return mailMsg{}
	}
}
