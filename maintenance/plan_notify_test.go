package maintenance_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	gomail "github.com/wneessen/go-mail"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/notifier/email"
	"github.com/approvals/approvals/notifier/webhook"
	"github.com/approvals/approvals/queue"
)

const planEventsSecret = "plan-events-secret"

// hookReceiver is a webhook receiver that accepts only events signed under the channel's
// secret (Standard Webhooks) and records them by path.
type hookReceiver struct {
	t      *testing.T
	mu     sync.Mutex
	events map[string][]webhook.Event
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	v, err := standardwebhooks.NewWebhookRaw([]byte(planEventsSecret))
	if err == nil {
		err = v.Verify(body, r.Header)
	}
	if err != nil {
		h.t.Errorf("webhook %s: signature: %v", r.URL.Path, err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev webhook.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		h.t.Errorf("webhook %s: %v", r.URL.Path, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events[r.URL.Path] = append(h.events[r.URL.Path], ev)
}

func (h *hookReceiver) types(path string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, ev := range h.events[path] {
		out = append(out, ev.Type)
	}
	return out
}

// mailbox is a real SMTP server (emersion/go-smtp) that keeps every message.
type mailbox struct {
	mu   sync.Mutex
	msgs []string
}

type mailSession struct{ m *mailbox }

func (s mailSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s mailSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s mailSession) Reset()                               {}
func (s mailSession) Logout() error                        { return nil }
func (s mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	// Undo quoted-printable's soft breaks and "=" escapes, enough to read the text.
	s.m.msgs = append(s.m.msgs, strings.NewReplacer("=\r\n", "", "=3D", "=").Replace(string(b)))
	return err
}

func (m *mailbox) all() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.msgs...)
}

func startMailbox(t *testing.T) (*mailbox, int) {
	t.Helper()
	m := &mailbox{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return mailSession{m}, nil }))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return m, l.Addr().(*net.TCPAddr).Port
}

// A pending plan is told once to the channels of its human steps' rules, by webhook (a
// signed plan.pending carrying the plan) and by mail (every step, the link); left pending,
// it is reminded of every remind_after and escalated once after escalate_after (two sweeps
// racing), after which escalate_to may decide it, and its decision is told too.
func TestPlanNotifiedRemindedAndEscalated(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			hooks := &hookReceiver{t: t, events: map[string][]webhook.Event{}}
			hs := httptest.NewServer(hooks)
			t.Cleanup(hs.Close)
			box, port := startMailbox(t)
			tools := `
groups:
  leads: [ann@example.com]
  night: [cara@example.com]
channels:
  hook: { webhook: "` + hs.URL + `/hook", secret: ` + planEventsSecret + ` }
  pager: { webhook: "` + hs.URL + `/pager", secret: ` + planEventsSecret + ` }
  mail: { email: { to: [leads@example.com] } }
  audit: { webhook: "` + hs.URL + `/audit", secret: ` + planEventsSecret + `, events: [plan.pending, plan.approved] }
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    preview: { title: "Mail {customer_id} about {topic}", topic: "{topic}", customer_id: "{customer_id}" }
    approval:
      approvers: [leads]
      notify: [hook, mail]
      remind_after: 15m
      escalate_after: 1h
      escalate_to: [night]
      escalate_notify: [pager]
  post_update:
    class: at-most-once
    intent: "post:{topic}"
  log_note:
    class: at-least-once
    intent: "log:{topic}"
`
			reg := apptest.ParseTools(t, tools, classify.Options{WebhookSecretSet: true, SMTPConfigured: true})
			clock := testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))
			e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: kind == "sqlite", Tools: reg, Clock: clock})
			ctx := t.Context()
			wh, err := webhook.New(webhook.Config{})
			if err != nil {
				t.Fatal(err)
			}
			server, err := email.ParseURL("smtp://127.0.0.1:" + strconv.Itoa(port))
			if err != nil {
				t.Fatal(err)
			}
			mailer, err := email.New(email.Config{Server: server, From: "approvals@example.com", PublicURL: "https://approvals.example.com", Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			outbox := e.Outbox(maintenance.OutboxConfig{Notifiers: map[string]queue.Notifier{
				classify.KindWebhook: maintenance.ChannelNotifier[[]byte](classify.KindWebhook, wh, e.Store, nil),
				classify.KindEmail:   maintenance.ChannelNotifier[*gomail.Msg](classify.KindEmail, mailer, e.Store, nil),
			}})
			deliver := func() {
				t.Helper()
				if _, err := outbox.FanOut(ctx, 100); err != nil {
					t.Fatal(err)
				}
				if _, err := outbox.SendDue(ctx); err != nil {
					t.Fatal(err)
				}
			}

			res, err := e.Service.Plans().Propose(ctx, queue.PlanRequest{Title: "Refund and tell", Agent: "bot", Channel: "api", Steps: []queue.PlanStepRequest{
				{Tool: "send_customer_email", Payload: []byte(`{"customer_id":"c42","topic":"refund"}`)},
				{Tool: "post_update", Payload: []byte(`{"topic":"refunds"}`)},
			}})
			if err != nil || res.Plan.State != queue.PlanPending {
				t.Fatalf("propose: %v, %+v", err, res.Plan)
			}
			pl := res.Plan
			// A plan no person decides is approved at once and tells nobody.
			if quiet, err := e.Service.Plans().Propose(ctx, queue.PlanRequest{Title: "Log it", Agent: "bot", Channel: "api",
				Steps: []queue.PlanStepRequest{{Tool: "log_note", Payload: []byte(`{"topic":"x"}`)}}}); err != nil || quiet.Plan.State != queue.PlanApproved {
				t.Fatalf("a plan of a step nobody decides: %v, %+v", err, quiet.Plan)
			}
			deliver()
			if got := hooks.types("/hook"); len(got) != 1 || got[0] != classify.EventPlanPending {
				t.Fatalf("hook got %v, want one plan.pending", got)
			}
			if got := hooks.types("/audit"); len(got) != 1 || got[0] != classify.EventPlanPending {
				t.Fatalf("the channel of events [plan.pending, plan.approved] got %v, want one plan.pending", got)
			}
			hooks.mu.Lock()
			sent := hooks.events["/hook"][0].Data.Plan
			hooks.mu.Unlock()
			if sent == nil || sent.ID != pl.ID || len(sent.Steps) != 2 || sent.Steps[0].Tool != "send_customer_email" {
				t.Fatalf("plan.pending carries %+v, want the plan with its 2 steps", sent)
			}
			mails := box.all()
			if len(mails) != 1 {
				t.Fatalf("%d mails, want 1", len(mails))
			}
			for _, want := range []string{"Step 1: send_customer_email", "Step 2: post_update", "Mail c42 about refund",
				"https://approvals.example.com/plans/" + pl.ID, "needs 1 approval(s)"} {
				if !strings.Contains(mails[0], want) {
					t.Errorf("mail lacks %q:\n%s", want, mails[0])
				}
			}
			if _, err := e.Service.Plans().Decide(ctx, queue.PlanDecideRequest{ID: pl.ID, To: queue.PlanApproved, By: "user:cara@example.com"}); queue.ErrorCode(err) != queue.CodeForbidden {
				t.Fatalf("escalate_to before the escalation: %v, want forbidden", err)
			}

			other := e.AddProcess()
			sweepBoth := func() (reminded, escalated int) {
				var res [2]maintenance.SweepResult
				var errs [2]error
				sweepers := []*maintenance.Sweeper{e.Sweeper(), other.Sweeper()}
				race(2, func(i int) { res[i], errs[i] = sweepers[i].Sweep(ctx) })
				for i := range res {
					if errs[i] != nil {
						t.Fatal(errs[i])
					}
					reminded += res[i].Reminded
					escalated += res[i].Escalated
				}
				return reminded, escalated
			}
			for i, st := range []struct {
				advance             time.Duration
				reminded, escalated int
			}{
				{15*time.Minute - time.Microsecond, 0, 0},
				{time.Microsecond, 1, 0}, // 15m
				{30 * time.Minute, 1, 0}, // 45m
				{15 * time.Minute, 1, 1}, // 60m: both
				{15 * time.Minute, 1, 0}, // 75m: no second escalation
			} {
				clock.Advance(st.advance)
				if r, x := sweepBoth(); r != st.reminded || x != st.escalated {
					t.Fatalf("step %d: reminded %d, escalated %d; want %d, %d", i, r, x, st.reminded, st.escalated)
				}
			}
			deliver()
			if got := strings.Join(hooks.types("/hook"), " "); got != "plan.pending plan.reminder plan.reminder plan.reminder plan.reminder" {
				t.Fatalf("hook got %s", got)
			}
			if got := hooks.types("/pager"); len(got) != 1 || got[0] != classify.EventPlanEscalated {
				t.Fatalf("pager got %v, want one plan.escalated", got)
			}
			if mails := box.all(); len(mails) != 5 || !strings.Contains(mails[1], "Reminder: approval needed") {
				t.Fatalf("%d mails, want the pending one and 4 reminders", len(mails))
			}
			dec, err := e.Service.Plans().Decide(ctx, queue.PlanDecideRequest{ID: pl.ID, To: queue.PlanApproved, By: "user:cara@example.com"})
			if err != nil || dec.Plan.State != queue.PlanApproved {
				t.Fatalf("escalate_to after the escalation: %v", err)
			}
			deliver()
			if got := hooks.types("/hook"); got[len(got)-1] != classify.EventPlanApproved {
				t.Fatalf("hook got %v, want plan.approved last", got)
			}
			if got := strings.Join(hooks.types("/audit"), " "); got != "plan.pending plan.approved" {
				t.Fatalf("audit got %s", got)
			}
			clock.Advance(time.Hour)
			if r, x := sweepBoth(); r != 0 || x != 0 {
				t.Fatalf("a decided plan was reminded (%d) or escalated (%d)", r, x)
			}
		})
	}
}

// A pending plan the sweep expires, with two sweepers racing, is told once as plan.expired
// (carrying the expired plan) to the webhook that was told of it, and to a channel that
// lists plan.expired in events; an approved plan that expires tells nobody.
func TestPlanExpiredNotifiedOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			hooks := &hookReceiver{t: t, events: map[string][]webhook.Event{}}
			hs := httptest.NewServer(hooks)
			t.Cleanup(hs.Close)
			tools := `
groups:
  leads: [ann@example.com]
channels:
  hook: { webhook: "` + hs.URL + `/hook", secret: ` + planEventsSecret + ` }
  audit: { webhook: "` + hs.URL + `/audit", secret: ` + planEventsSecret + `, events: [plan.expired] }
tools:
  post_update:
    class: at-most-once
    intent: "post:{topic}"
    approval: { approvers: [leads], notify: [hook] }
`
			reg := apptest.ParseTools(t, tools, classify.Options{WebhookSecretSet: true})
			clock := testclock.At(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))
			e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: kind == "sqlite", Tools: reg, Clock: clock})
			ctx := t.Context()
			wh, err := webhook.New(webhook.Config{})
			if err != nil {
				t.Fatal(err)
			}
			outbox := e.Outbox(maintenance.OutboxConfig{Notifiers: map[string]queue.Notifier{
				classify.KindWebhook: maintenance.ChannelNotifier[[]byte](classify.KindWebhook, wh, e.Store, nil)}})
			deliver := func() {
				t.Helper()
				if _, err := outbox.FanOut(ctx, 100); err != nil {
					t.Fatal(err)
				}
				if _, err := outbox.SendDue(ctx); err != nil {
					t.Fatal(err)
				}
			}
			propose := func(topic string) *queue.Plan {
				t.Helper()
				res, err := e.Service.Plans().Propose(ctx, queue.PlanRequest{Title: "Post " + topic, Agent: "bot", Channel: "api",
					Steps: []queue.PlanStepRequest{{Tool: "post_update", Payload: []byte(`{"topic":"` + topic + `"}`)}}})
				if err != nil || res.Plan.State != queue.PlanPending {
					t.Fatalf("propose: %v", err)
				}
				return res.Plan
			}
			pl, approved := propose("a"), propose("b")
			if _, err := e.Service.Plans().Decide(ctx, queue.PlanDecideRequest{ID: approved.ID, To: queue.PlanApproved, By: "user:ann@example.com"}); err != nil {
				t.Fatal(err)
			}
			// sorted: one delivery round sends in no set order
			sorted := func(path string) string { got := hooks.types(path); slices.Sort(got); return strings.Join(got, " ") }
			deliver()
			if got := sorted("/hook"); got != "plan.approved plan.pending plan.pending" {
				t.Fatalf("hook got %s", got)
			}
			clock.Advance(queue.DefaultPlanExpiry)
			other := e.AddProcess()
			var res [2]maintenance.SweepResult
			var errs [2]error
			sweepers := []*maintenance.Sweeper{e.Sweeper(), other.Sweeper()}
			race(2, func(i int) { res[i], errs[i] = sweepers[i].Sweep(ctx) })
			if errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
			if n := len(res[0].PlansExpired) + len(res[1].PlansExpired); n != 2 {
				t.Fatalf("the sweepers expired %d plans, want 2", n)
			}
			deliver()
			deliver()
			if got := sorted("/hook"); got != "plan.approved plan.expired plan.pending plan.pending" {
				t.Fatalf("hook got %s, want one plan.expired more", got)
			}
			if got := hooks.types("/audit"); len(got) != 1 || got[0] != classify.EventPlanExpired {
				t.Fatalf("the channel of events [plan.expired] got %v, want one plan.expired", got)
			}
			hooks.mu.Lock()
			var told *queue.Plan
			for _, ev := range hooks.events["/hook"] {
				if ev.Type == classify.EventPlanExpired {
					told = ev.Data.Plan
				}
			}
			hooks.mu.Unlock()
			if told == nil || told.ID != pl.ID || told.State != queue.PlanExpired {
				t.Fatalf("plan.expired carries %+v, want plan %s expired", told, pl.ID)
			}
		})
	}
}
