package executor_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/executor"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
)

const testSecret = "s3cret-for-tests"

// provider is a fake webhook receiver that counts effects. What it answers
// depends on the payload's "respond" field, so one provider serves a whole
// table of cases. It checks every delivery's signature and headers.
type provider struct {
	t           testing.TB
	srv         *httptest.Server
	release     chan struct{} // "hold" deliveries answer 200 once it closes
	releaseOnce sync.Once
	arrived     chan string // action ids, as deliveries arrive

	mu       sync.Mutex
	hits     map[string]int    // deliveries by X-Approvals-Action
	keys     map[string]string // Idempotency-Key by action
	problems []string
	total    int
}

func newProvider(t testing.TB) *provider {
	p := &provider{t: t, release: make(chan struct{}), arrived: make(chan string, 1000),
		hits: map[string]int{}, keys: map[string]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	t.Cleanup(p.releaseAll) // before Close: let held deliveries end
	return p
}

func (p *provider) releaseAll() { p.releaseOnce.Do(func() { close(p.release) }) }

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/elsewhere" {
		p.mu.Lock()
		p.problems = append(p.problems, "a redirect was followed")
		p.mu.Unlock()
		return
	}
	body, _ := io.ReadAll(r.Body)
	id := r.Header.Get("X-Approvals-Action")
	p.mu.Lock()
	p.total++
	p.hits[id]++
	p.keys[id] = r.Header.Get("Idempotency-Key")
	check := func(ok bool, format string, args ...any) {
		if !ok {
			p.problems = append(p.problems, fmt.Sprintf("action %s: ", id)+fmt.Sprintf(format, args...))
		}
	}
	check(r.Method == http.MethodPost, "method %s", r.Method)
	check(r.Header.Get("Content-Type") == "application/json", "Content-Type %q", r.Header.Get("Content-Type"))
	// A receiver verifies the Standard Webhooks signature with the
	// official library; the message id is the action id.
	verifier, err := standardwebhooks.NewWebhookRaw([]byte(testSecret))
	check(err == nil, "verifier: %v", err)
	if err == nil {
		err = verifier.Verify(body, r.Header)
		check(err == nil, "signature refused by the Standard Webhooks library: %v", err)
	}
	check(r.Header.Get("webhook-id") == id, "webhook-id %q, want the action id", r.Header.Get("webhook-id"))
	check(r.Header.Get("Idempotency-Key") != "", "no Idempotency-Key")
	_, err = strconv.Atoi(r.Header.Get("X-Approvals-Attempt"))
	check(err == nil, "X-Approvals-Attempt %q", r.Header.Get("X-Approvals-Attempt"))
	p.mu.Unlock()
	p.arrived <- id

	var payload struct{ Respond string }
	_ = json.Unmarshal(body, &payload)
	switch mode := payload.Respond; {
	case mode == "" || mode == "json":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"message_id": "m-%s", "n": 1.50}`, id)
	case mode == "text":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, "queued <ok> & \xff done")
	case mode == "big":
		fmt.Fprint(w, strings.Repeat("é", 50<<10)) // 100 KiB
	case mode == "nul":
		fmt.Fprint(w, `{"a": "x\u0000y"}`)
	case mode == "redirect":
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	case mode == "hang": // past the executor timeout
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	case mode == "hold":
		select {
		case <-p.release:
			fmt.Fprint(w, `{"held": true}`)
		case <-r.Context().Done():
		}
	case strings.HasPrefix(mode, "status:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(mode, "status:"))
		w.WriteHeader(n)
		fmt.Fprintf(w, "status %d", n)
	default:
		p.t.Errorf("provider: unknown mode %q", mode)
	}
}

// deliveries returns how often action id was delivered.
func (p *provider) deliveries(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[id]
}

// check fails the test for every malformed delivery seen.
func (p *provider) check(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.problems {
		t.Error(pr)
	}
}

// execEnv is the domain harness (one database, as several server
// processes would share it) with a fake provider.
type execEnv struct {
	*apptest.Env
	prov *provider
}

// execTools are four webhook tools (three calling hook, one unreachable)
// and the domain tests' two (apptest.DomainTools).
func execTools(hook, unreachable string) string {
	return fmt.Sprintf(`
tools:
  notify_partner:
    class: at-most-once
    intent: "partner:{partner}:{topic}"
    claim_timeout: 2m
    expires_after: 1h
    check: "Search the partner's inbox for the Idempotency-Key."
    executor: { webhook: %q, timeout: 30s }
  notify_slow:
    class: at-most-once
    intent: "slow:{partner}:{topic}"
    claim_timeout: 2m
    executor: { webhook: %q, timeout: 1s }
  notify_held:
    class: at-most-once
    intent: "held:{topic}"
    claim_timeout: 2m
    executor: { webhook: %q, timeout: 30s }
  notify_unreachable:
    class: at-most-once
    intent: "unreachable:{topic}"
    claim_timeout: 2m
    executor: { webhook: %q, timeout: 30s }
`, hook, hook, hook, unreachable) + strings.TrimPrefix(apptest.DomainTools, "\ntools:\n")
}

// startExec starts one database (SQLite with sqlite set, else PostgreSQL)
// with a fake provider and a service over it; its clock follows real time
// until advanced.
func startExec(t *testing.T, sqlite bool) *execEnv {
	t.Helper()
	e := &execEnv{prov: newProvider(t)}
	e.Env = apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Tools: execRegistry(t, e.prov),
		WaitRecheck: time.Second})
	t.Cleanup(func() { e.prov.check(t) })
	return e
}

// execRegistry returns the tools of execTools with webhooks at prov and at
// a port where nothing listens.
func execRegistry(t *testing.T, prov *provider) *classify.Registry {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/gone"
	ln.Close()
	reg, err := classify.Parse([]byte(execTools(prov.srv.URL+"/hook", closed)), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// runDispatcher starts a dispatcher over svc; stop ends it and waits for
// the deliveries under way, as a server shutting down does.
func (e *execEnv) runDispatcher(svc *queue.Service, outcomes func(string)) (d *executor.Webhook, stop func()) {
	return e.runDispatcherConfig(svc, executor.WebhookConfig{OnOutcome: outcomes})
}

// runDispatcherConfig is runDispatcher with more of the configuration; the
// secret and a 1s recheck are set unless given.
func (e *execEnv) runDispatcherConfig(svc *queue.Service, cfg executor.WebhookConfig) (d *executor.Webhook, stop func()) {
	if cfg.Secret == "" {
		cfg.Secret = testSecret
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = time.Second
	}
	d, err := executor.NewWebhook(queue.NewDispatch(svc), cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	e.T.Cleanup(stop)
	return d, stop
}

// waitState waits (on notifications, not sleeps) until the action is in
// state want.
func (e *execEnv) waitState(id string, want queue.State) *queue.Action {
	e.T.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a, err := e.Polls.Wait(context.Background(), id, "", time.Until(deadline))
		if err != nil {
			e.T.Fatal(err)
		}
		if a.State == want {
			return a
		}
		if a.State.Final() || time.Now().After(deadline) {
			e.T.Fatalf("action %s is %s (error %v), want %s", id, a.State, apptest.Deref(a.Error), want)
		}
	}
}

// waitEvent polls the timeline for an event that changes no state.
func (e *execEnv) waitEvent(id, kind string) queue.Event {
	e.T.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs, err := queue.Timeline(context.Background(), e.Store, id)
		if err != nil {
			e.T.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Kind == kind {
				return ev
			}
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("no %s event for %s: %+v", kind, id, evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func partner(topic, respond string) map[string]any {
	return map[string]any{"partner": "acme", "topic": topic, "respond": respond, "text": "hello"}
}

func TestWebhookDeliveryOutcomes(t *testing.T) {
	t.Parallel()
	e := startExec(t, false)
	var mu sync.Mutex
	outcomes := map[string]int{}
	e.runDispatcher(e.Service, func(o string) { mu.Lock(); outcomes[o]++; mu.Unlock() })
	// OnOutcome runs before the outcome is stored, so every subtest's
	// delivery is counted once the subtests have ended.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		want := map[string]int{
			executor.DeliveryDone:    6, // json, text, big, nul, status:204, and the webhook action of the agent-executed case
			executor.DeliveryFailed:  9, // the nine refusing statuses
			executor.DeliveryUnknown: 7, // 500, 503, 409, 429, redirect, hang, unreachable
		}
		if len(outcomes) != len(want) {
			t.Errorf("outcomes %v, want %v", outcomes, want)
		}
		for o, n := range want {
			if outcomes[o] != n {
				t.Errorf("%d %s outcomes, want %d (all: %v)", outcomes[o], o, n, outcomes)
			}
		}
	})

	bigText := strings.Repeat("é", 32<<10) // 64 KiB: the cut keeps whole runes
	cases := []struct {
		respond string
		state   queue.State
		result  string // JSON the stored result must equal
		err     string
	}{
		{"json", queue.StateDone, `{"message_id": "m-ID", "n": 1.5}`, ""},
		{"text", queue.StateDone, `{"body": "queued <ok> & \ufffd done"}`, ""},
		{"big", queue.StateDone, `{"body": "` + bigText + `"}`, ""},
		{"nul", queue.StateDone, `{"body": "{\"a\": \"x\\u0000y\"}"}`, ""},
		{"status:204", queue.StateDone, `{"body": ""}`, ""},
		{"status:400", queue.StateFailed, "", "the receiver refused it with status 400"},
		{"status:401", queue.StateFailed, "", "the receiver refused it with status 401"},
		{"status:403", queue.StateFailed, "", "the receiver refused it with status 403"},
		{"status:404", queue.StateFailed, "", "the receiver refused it with status 404"},
		{"status:405", queue.StateFailed, "", "the receiver refused it with status 405"},
		{"status:410", queue.StateFailed, "", "the receiver refused it with status 410"},
		{"status:413", queue.StateFailed, "", "the receiver refused it with status 413"},
		{"status:415", queue.StateFailed, "", "the receiver refused it with status 415"},
		{"status:422", queue.StateFailed, "", "the receiver refused it with status 422"},
		{"status:500", queue.StateInProgress, "", ""},
		{"status:503", queue.StateInProgress, "", ""},
		{"status:409", queue.StateInProgress, "", ""},
		{"status:429", queue.StateInProgress, "", ""},
		{"redirect", queue.StateInProgress, "", ""},
		{"hang", queue.StateInProgress, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.respond, func(t *testing.T) {
			t.Parallel()
			// Generous delivery timeouts where a delivery must succeed; the
			// short one (notify_slow, 1 s) only where it is the behaviour.
			tool := "notify_partner"
			if tc.respond == "hang" {
				tool = "notify_slow"
			}
			a := e.Submit(tool, partner(tc.respond, tc.respond))
			apptest.Approve(t, e.Service, a.ID)
			var got *queue.Action
			if tc.state == queue.StateInProgress {
				ev := e.waitEvent(a.ID, queue.EventDeliveryResult)
				if ev.Actor != queue.DispatcherActor {
					t.Errorf("delivery_unknown by %s", ev.Actor)
				}
				got, _ = e.Store.ActionGetByID(context.Background(), a.ID)
			} else {
				got = e.waitState(a.ID, tc.state)
			}
			if got.State != tc.state || apptest.Deref(got.ClaimedBy) != queue.DispatcherActor || got.ClaimedAt == nil {
				t.Fatalf("state %s claimed by %v at %v, want %s by the dispatcher", got.State, apptest.Deref(got.ClaimedBy), got.ClaimedAt, tc.state)
			}
			if want := strings.ReplaceAll(tc.result, "ID", a.ID); want != "" && !queue.JSONEqual(got.Result, []byte(want)) {
				t.Errorf("result %.200s, want %.200s", got.Result, want)
			}
			if tc.err != "" && apptest.Deref(got.Error) != tc.err {
				t.Errorf("error %v, want %q", apptest.Deref(got.Error), tc.err)
			}
			if n := e.prov.deliveries(a.ID); n != 1 {
				t.Errorf("%d deliveries, want 1", n)
			}
			e.prov.mu.Lock()
			key := e.prov.keys[a.ID]
			e.prov.mu.Unlock()
			if key != a.IntentKey {
				t.Errorf("Idempotency-Key %q, want the intent key %q", key, a.IntentKey)
			}
			// Write-ahead: claimed, then delivery_started, then the outcome.
			evs, _ := queue.Timeline(context.Background(), e.Store, a.ID)
			var kinds []string
			for _, ev := range evs {
				kinds = append(kinds, ev.Kind)
			}
			outcome := map[queue.State]string{queue.StateDone: queue.EventCompleted, queue.StateFailed: queue.EventFailed,
				queue.StateInProgress: queue.EventDeliveryResult}[tc.state]
			if want := "submitted approved claimed delivery_started " + outcome; strings.Join(kinds, " ") != want {
				t.Errorf("timeline %v, want %s", kinds, want)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		a := e.Submit("notify_unreachable", map[string]any{"topic": "x"})
		apptest.Approve(t, e.Service, a.ID)
		ev := e.waitEvent(a.ID, queue.EventDeliveryResult)
		if got, _ := e.Store.ActionGetByID(context.Background(), a.ID); got.State != queue.StateInProgress || !strings.Contains(string(ev.Data), "error") {
			t.Fatalf("connection refused: %s, event %s", got.State, ev.Data)
		}
	})
	t.Run("agent-executed tools are left to the agent", func(t *testing.T) {
		t.Parallel()
		mail := e.Submit("send_customer_email", map[string]any{"customer_id": "c-1", "topic": "left"})
		apptest.Approve(t, e.Service, mail.ID)
		hook := e.Submit("notify_partner", partner("after-mail", "json"))
		apptest.Approve(t, e.Service, hook.ID)
		e.waitState(hook.ID, queue.StateDone)
		if got, _ := e.Store.ActionGetByID(context.Background(), mail.ID); got.State != queue.StateApproved || e.prov.deliveries(mail.ID) != 0 {
			t.Fatalf("an agent-executed action was taken by the dispatcher: %s", got.State)
		}
		// And the agent may not finish a webhook action itself.
		if _, err := e.Service.Complete(context.Background(), hook.ID, "bot", json.RawMessage(`{}`), "api"); queue.ErrorCode(err) != queue.CodeInvalidTransition {
			t.Fatalf("agent complete of a webhook action: %v", err)
		}
	})
}

// An unknown outcome is never re-sent: not by the dispatcher that sent it,
// not by another process, not after a restart. After claim_timeout it
// becomes exactly one ticket, however many processes sweep, and the
// operator's finding settles it.
func TestUnknownOutcomeBecomesOneTicket(t *testing.T) {
	t.Parallel()
	e := startExec(t, false)
	_, stop := e.runDispatcher(e.Service, nil)
	others := []*apptest.Env{e.AddProcess(), e.AddProcess()}
	var live []*executor.Webhook // the dispatchers of the processes still running
	for _, o := range others {
		d, _ := e.runDispatcher(o.Service, nil)
		live = append(live, d)
	}
	a500 := e.Submit("notify_partner", partner("five-hundred", "status:500"))
	hang := e.Submit("notify_slow", partner("hang", "hang")) // its 1 s timeout is what leaves it unknown
	for _, a := range []*queue.Action{a500, hang} {
		apptest.Approve(t, e.Service, a.ID)
	}
	for _, a := range []*queue.Action{a500, hang} {
		e.waitEvent(a.ID, queue.EventDeliveryResult)
	}
	// A restart: a fresh dispatcher scans at start; nothing in_progress is
	// taken again.
	stop()
	restarted := e.AddProcess()
	d, _ := e.runDispatcher(restarted.Service, nil)
	live = append(live, d)

	// Before claim_timeout: no ticket.
	e.Clock.Advance(time.Minute)
	if res, err := e.Sweeper().Sweep(context.Background()); err != nil || len(res.Tickets) != 0 {
		t.Fatalf("sweep before claim_timeout: %v %d tickets", err, len(res.Tickets))
	}
	e.Clock.Advance(61 * time.Second)
	sweepers := []*maintenance.Sweeper{e.Sweeper(), restarted.Sweeper()}
	for _, o := range others {
		sweepers = append(sweepers, o.Sweeper())
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	opened := make([]int, len(sweepers)*3)
	for i := range opened {
		wg.Go(func() {
			<-start
			res, err := sweepers[i%len(sweepers)].Sweep(context.Background())
			if err != nil {
				t.Error(err)
			}
			opened[i] = len(res.Tickets)
		})
	}
	close(start)
	wg.Wait()
	total := 0
	for _, n := range opened {
		total += n
	}
	if total != 2 {
		t.Fatalf("concurrent sweeps opened %d tickets (%v), want 2", total, opened)
	}
	for _, tc := range []struct {
		a       *queue.Action
		outcome queue.State
		result  string
	}{{a500, queue.StateDone, `{"found": "in the partner's log"}`}, {hang, queue.StateFailed, ""}} {
		open, err := e.Store.TicketList(context.Background(), queue.TicketListParams{ActionID: tc.a.ID, State: queue.TicketOpen})
		if err != nil || len(open) != 1 || open[0].Kind != queue.TicketStale {
			t.Fatalf("open tickets of %s: %v %+v", tc.a.ID, err, open)
		}
		a, tk, err := restarted.Service.Tickets().Resolve(context.Background(), queue.ResolveRequest{TicketID: open[0].ID,
			By: "user:ops@example.com", Outcome: tc.outcome, Result: json.RawMessage(tc.result), Note: "checked the partner's log"})
		if err != nil || a.State != tc.outcome || tk.State != queue.TicketResolved || apptest.Deref(tk.ResolvedBy) != "user:ops@example.com" {
			t.Fatalf("resolve: %v %+v %+v", err, a, tk)
		}
		if tc.result != "" && !queue.JSONEqual(a.Result, []byte(tc.result)) {
			t.Fatalf("result %s, want %s", a.Result, tc.result)
		}
		if _, _, err := e.Service.Tickets().Resolve(context.Background(), queue.ResolveRequest{TicketID: open[0].ID,
			By: "user:other@example.com", Outcome: queue.StateDone, Note: "me too"}); queue.ErrorCode(err) != queue.CodeTicketResolved {
			t.Fatalf("resolving twice: %v", err)
		}
	}
	// Give the dispatchers a chance to misbehave: each scans for approved
	// actions, as on its timer, and waits for what it started.
	for _, d := range live {
		d.Scan(context.Background())
	}
	for _, a := range []*queue.Action{a500, hang} {
		if n := e.prov.deliveries(a.ID); n != 1 {
			t.Fatalf("action %s delivered %d times, want 1", a.ID, n)
		}
		if n := e.EventCount(a.ID, queue.EventClaimed); n != 1 {
			t.Fatalf("action %s claimed %d times", a.ID, n)
		}
	}
	if res, err := e.Sweeper().Sweep(context.Background()); err != nil || len(res.Tickets) != 0 {
		t.Fatalf("sweep after resolution: %v %d tickets", err, len(res.Tickets))
	}
}

// Three processes, fifty approved actions: fifty deliveries, none twice.
// Half are approved before any dispatcher runs (left by a crash), half
// while they run, through all three processes.
func TestThreeDispatchersDeliverEachActionOnce(t *testing.T) {
	t.Parallel()
	e := startExec(t, false)
	svcs := []*queue.Service{e.Service, e.AddProcess().Service, e.AddProcess().Service}
	var ids []string
	for i := range 50 {
		ids = append(ids, e.Submit("notify_partner", partner(fmt.Sprintf("bulk-%02d", i), "json")).ID)
	}
	for i, id := range ids[:25] {
		apptest.Approve(t, svcs[i%3], id)
	}
	began := time.Now()
	var ds []*executor.Webhook
	for _, s := range svcs {
		d, _ := e.runDispatcher(s, nil)
		ds = append(ds, d)
	}
	var wg sync.WaitGroup
	for i, id := range ids[25:] {
		wg.Go(func() { apptest.Approve(t, svcs[i%3], id) })
	}
	wg.Wait()
	for _, id := range ids {
		e.waitState(id, queue.StateDone)
	}
	t.Logf("50 actions delivered by 3 dispatchers in %s", time.Since(began).Round(time.Millisecond))
	// Let every dispatcher scan again, as on its timer, before counting.
	for _, d := range ds {
		d.Scan(context.Background())
	}
	e.prov.mu.Lock()
	defer e.prov.mu.Unlock()
	if e.prov.total != 50 || len(e.prov.hits) != 50 {
		t.Fatalf("%d deliveries of %d actions, want 50 of 50", e.prov.total, len(e.prov.hits))
	}
	for _, id := range ids {
		if e.prov.hits[id] != 1 {
			t.Errorf("action %s delivered %d times", id, e.prov.hits[id])
		}
	}
}

// Shutdown stops claiming at once, and a delivery under way runs to its
// end: its outcome is recorded. With one slot, held by a delivery, a
// second approval waits for the slot; cancelling the worker then claims
// nothing, even once the slot frees.
func TestDispatcherShutdownFinishesDeliveryUnderWay(t *testing.T) {
	t.Parallel()
	e := startExec(t, false)
	// The dispatcher's process reads through a store that reports each
	// action it reads, so the test knows when the second approval has
	// reached the dispatcher.
	reads := make(chan string, 100)
	svc := e.AddWrappedProcess(func(st queue.Store) queue.Store { return &readSpy{Store: st, reads: reads} }).Service
	// A recheck longer than the test: only the approval's notification
	// offers the second action to the dispatcher.
	_, stop := e.runDispatcherConfig(svc, executor.WebhookConfig{Concurrency: 1, Recheck: time.Hour})

	held := e.Submit("notify_held", map[string]any{"topic": "held", "respond": "hold"})
	apptest.Approve(t, e.Service, held.ID)
	select {
	case id := <-e.prov.arrived:
		if id != held.ID {
			t.Fatalf("delivery of %s, want %s", id, held.ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held delivery did not arrive")
	}
	late := e.Submit("notify_partner", partner("late", "json"))
	apptest.Approve(t, e.Service, late.ID)
	// The dispatcher read the approved action: it is waiting for the slot.
	for id := ""; id != late.ID; {
		select {
		case id = <-reads:
		case <-time.After(20 * time.Second):
			t.Fatal("the dispatcher never read the second approval")
		}
	}

	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("the dispatcher stopped with a delivery under way")
	case <-time.After(200 * time.Millisecond):
	}
	e.prov.releaseAll()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the dispatcher did not stop once the delivery under way ended")
	}
	got, _ := e.Store.ActionGetByID(context.Background(), held.ID)
	if got.State != queue.StateDone || !queue.JSONEqual(got.Result, []byte(`{"held": true}`)) {
		t.Fatalf("held delivery: %s %s", got.State, got.Result)
	}
	if got, _ := e.Store.ActionGetByID(context.Background(), late.ID); got.State != queue.StateApproved || e.prov.deliveries(late.ID) != 0 {
		t.Fatalf("a stopped dispatcher claimed %s: %s, %d deliveries", late.ID, got.State, e.prov.deliveries(late.ID))
	}
	if n := e.EventCount(late.ID, queue.EventClaimed); n != 0 {
		t.Fatalf("%d claimed events for %s", n, late.ID)
	}
}

// readSpy is a store that sends the id of every action read by id.
type readSpy struct {
	queue.Store
	reads chan<- string
}

func (s *readSpy) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	a, err := s.Store.ActionGetByID(ctx, id)
	select {
	case s.reads <- id:
	default:
	}
	return a, err
}

// A 2xx answer that finds the action already settled by someone else (an
// operator, after its claim went stale) keeps the receiver's answer on
// record. The same result is only an event; another result opens a
// conflict ticket, as an agent's contradicting report does.
func TestDeliveryAfterOperatorSettledIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		result   string // the operator's finding
		conflict bool
	}{
		{"same result", `{"held": true}`, false},
		{"different result", `{"held": false}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := startExec(t, false)
			e.runDispatcher(e.Service, nil)
			a := e.Submit("notify_held", map[string]any{"topic": tc.name, "respond": "hold"})
			apptest.Approve(t, e.Service, a.ID)
			select {
			case id := <-e.prov.arrived:
				if id != a.ID {
					t.Fatalf("delivery of %s, want %s", id, a.ID)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the delivery did not arrive")
			}
			e.Clock.Advance(2 * time.Minute)
			res, err := e.Sweeper().Sweep(ctx)
			if err != nil || len(res.Tickets) != 1 {
				t.Fatalf("sweep: %v %+v", err, res.Tickets)
			}
			settled, _, err := e.Service.Tickets().Resolve(ctx, queue.ResolveRequest{TicketID: res.Tickets[0].ID, By: "user:ops@example.com",
				Outcome: queue.StateDone, Result: json.RawMessage(tc.result), Note: "found it in the partner's inbox"})
			if err != nil || settled.State != queue.StateDone {
				t.Fatalf("resolve: %v %+v", err, settled)
			}
			e.prov.releaseAll()

			kind := queue.EventDeliveryResult
			if tc.conflict {
				kind = queue.EventOutcomeConflict
			}
			ev := e.waitEvent(a.ID, kind)
			if ev.Actor != queue.DispatcherActor || !strings.Contains(string(ev.Data), `"held":true`) {
				t.Fatalf("%s event %+v", kind, ev)
			}
			got, _ := e.Store.ActionGetByID(ctx, a.ID)
			if got.State != queue.StateDone || !queue.JSONEqual(got.Result, []byte(tc.result)) {
				t.Fatalf("the operator's outcome changed: %s %s", got.State, got.Result)
			}
			open, err := e.Store.TicketList(ctx, queue.TicketListParams{ActionID: a.ID, State: queue.TicketOpen})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.conflict && (len(open) != 1 || open[0].Kind != queue.TicketConflict):
				t.Fatalf("open tickets %+v, want one conflict ticket", open)
			case !tc.conflict && len(open) != 0:
				t.Fatalf("open tickets %+v, want none", open)
			}
			// One answer, recorded once, one way; the one completed event
			// is the operator's finding, not the late delivery's.
			for k, want := range map[string]int{queue.EventDeliveryResult: btoi(!tc.conflict), queue.EventOutcomeConflict: btoi(tc.conflict),
				queue.EventCompleted: 1} {
				if n := e.EventCount(a.ID, k); n != want {
					t.Errorf("%d %s events, want %d", n, k, want)
				}
			}
			events, err := queue.Timeline(ctx, e.Store, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range events {
				if ev.Kind == queue.EventCompleted && ev.Actor != "user:ops@example.com" {
					t.Errorf("completed event by %s, want the operator's", ev.Actor)
				}
			}
			if n := e.prov.deliveries(a.ID); n != 1 {
				t.Fatalf("%d deliveries, want 1", n)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Without a secret nothing is claimed: deliveries are never unsigned.
func TestDispatcherWithoutSecretClaimsNothing(t *testing.T) {
	t.Parallel()
	e := startExec(t, false)
	a := e.Submit("notify_partner", partner("unsigned", "json"))
	apptest.Approve(t, e.Service, a.ID)
	d, err := executor.NewWebhook(queue.NewDispatch(e.Service), executor.WebhookConfig{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		d.Run(context.Background())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a dispatcher without a secret kept running")
	}
	d.Scan(context.Background())
	if got, _ := e.Store.ActionGetByID(context.Background(), a.ID); got.State != queue.StateApproved {
		t.Fatalf("state %s, want approved", got.State)
	}
}

// A tool whose executor names its own secret is signed with it, in place of
// APPROVALS_WEBHOOK_SECRET, also when that is not set: the receiver verifies
// with the tool's key. The secret is taken from the tools file in force; it
// is not in the action's snapshot.
func TestDispatcherSignsWithTheToolsOwnSecret(t *testing.T) {
	t.Parallel()
	for _, def := range []string{"", "whsec_" + base64.StdEncoding.EncodeToString([]byte("the default, not the receiver's"))} {
		e := startExec(t, false)
		src := fmt.Sprintf("tools:\n  notify_partner:\n    class: at-most-once\n    intent: \"partner:{partner}:{topic}\"\n"+
			"    claim_timeout: 2m\n    executor: { webhook: %q, timeout: 30s, secret: %q }\n", e.prov.srv.URL+"/hook", testSecret)
		reg, err := classify.Parse([]byte(src), classify.Options{WebhookSecretSet: def != "", WebhookSecret: def})
		if err != nil {
			t.Fatal(err)
		}
		e.CurrentTools.Store(reg)
		a := e.Submit("notify_partner", partner("own-secret", "json"))
		if snap, _ := json.Marshal(a.Spec); strings.Contains(string(snap), testSecret) {
			t.Fatalf("the executor's secret is in the action's snapshot: %s", snap)
		}
		apptest.Approve(t, e.Service, a.ID)
		d, err := executor.NewWebhook(queue.NewDispatch(e.Service), executor.WebhookConfig{Secret: def})
		if err != nil {
			t.Fatal(err)
		}
		d.Scan(context.Background())
		if got, _ := e.Store.ActionGetByID(context.Background(), a.ID); got.State != queue.StateDone {
			t.Fatalf("default %q: state %s, want done (signed with the tool's secret)", def, got.State)
		}
	}
}

// The embedded SQLite store drives the same dispatcher: one delivery per
// approval, outcomes recorded, an unknown one becoming one ticket.
func TestWebhookDeliveryOnSQLite(t *testing.T) {
	t.Parallel()
	e := startExec(t, true)
	e.runDispatcher(e.Service, nil)

	done := e.Submit("notify_partner", partner("sqlite-done", "json"))
	refused := e.Submit("notify_partner", partner("sqlite-refused", "status:422"))
	unknown := e.Submit("notify_partner", partner("sqlite-unknown", "status:502"))
	for _, a := range []*queue.Action{done, refused, unknown} {
		apptest.Approve(t, e.Service, a.ID)
	}
	e.waitState(done.ID, queue.StateDone)
	e.waitState(refused.ID, queue.StateFailed)
	e.waitEvent(unknown.ID, queue.EventDeliveryResult)
	e.Clock.Advance(2 * time.Minute)
	res, err := e.Sweeper().Sweep(context.Background())
	if err != nil || len(res.Tickets) != 1 || res.Tickets[0].ActionID != unknown.ID {
		t.Fatalf("sweep: %v %+v", err, res.Tickets)
	}
	for _, a := range []*queue.Action{done, refused, unknown} {
		if n := e.prov.deliveries(a.ID); n != 1 {
			t.Errorf("action %s delivered %d times", a.ID, n)
		}
	}
}

// A "whsec_" secret whose rest is not base64 stops the dispatcher from
// being built, so a typo fails startup instead of signing with garbage.
func TestWebhookRefusesInvalidSecret(t *testing.T) {
	t.Parallel()
	svc := queue.NewService(nil, nil, queue.Options{})
	for _, tc := range []struct {
		secret string
		ok     bool
	}{
		{"", true}, // off: nothing is sent
		{"plain-secret", true},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true},
		{"whsec_not base64!", false},
	} {
		_, err := executor.NewWebhook(queue.NewDispatch(svc), executor.WebhookConfig{Secret: tc.secret})
		if (err == nil) != tc.ok {
			t.Errorf("secret %q: err %v, want ok=%v", tc.secret, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "APPROVALS_WEBHOOK_SECRET") {
			t.Errorf("secret %q: error %q does not name the setting", tc.secret, err)
		}
	}
}

// An approval offered twice (a scan started its delivery, then its own
// notification arrives while the claim is not visible yet) is skipped: with
// one slot, waiting for a slot for the duplicate stalled every other
// approval behind it (seen as a CI flake of the shutdown test above).
func TestDispatcherSkipsDuplicateOffers(t *testing.T) {
	t.Parallel()
	e := startExec(t, false)
	reads := make(chan string, 100)
	var spy *dupSpy
	svc := e.AddWrappedProcess(func(st queue.Store) queue.Store {
		spy = &dupSpy{readSpy: readSpy{Store: st, reads: reads}, inject: make(chan queue.Change, 1)}
		return spy
	}).Service
	_, stop := e.runDispatcherConfig(svc, executor.WebhookConfig{Concurrency: 1, Recheck: time.Hour})
	t.Cleanup(stop)

	held := e.Submit("notify_held", map[string]any{"topic": "held", "respond": "hold"})
	apptest.Approve(t, e.Service, held.ID)
	select {
	case <-e.prov.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the held delivery did not arrive")
	}
	// The duplicate: the held action offered again and read as approved,
	// as when the notification overtakes the claim.
	spy.staleApproved.Store(held.ID)
	spy.inject <- queue.Change{ActionID: held.ID, State: queue.StateApproved}
	waitRead := func(id string) {
		t.Helper()
		for got := ""; got != id; {
			select {
			case got = <-reads:
			case <-time.After(20 * time.Second):
				t.Fatalf("the dispatcher never read %s", id)
			}
		}
	}
	waitRead(held.ID)
	late := e.Submit("notify_partner", partner("dup", "json"))
	apptest.Approve(t, e.Service, late.ID)
	waitRead(late.ID) // not stalled behind the duplicate
	e.prov.releaseAll()
	if n := e.prov.deliveries(held.ID); n != 1 {
		t.Errorf("held action delivered %d times, want 1", n)
	}
}

// dupSpy is a readSpy whose change feed also carries injected changes and
// which reads one action (staleApproved) as still approved.
type dupSpy struct {
	readSpy
	inject        chan queue.Change
	staleApproved atomic.Value // string
}

func (s *dupSpy) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	a, err := s.readSpy.ActionGetByID(ctx, id)
	if err == nil && s.staleApproved.Load() == id {
		stale := *a
		stale.State = queue.StateApproved
		return &stale, nil
	}
	return a, err
}

func (s *dupSpy) Subscribe() queue.Subscription {
	sub := s.readSpy.Subscribe()
	real, cancel := sub.Changes, sub.Cancel
	out := make(chan queue.Change, 16)
	done := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case c, ok := <-real:
				if !ok {
					return
				}
				out <- c
			case c := <-s.inject:
				out <- c
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return queue.Subscription{Changes: out, Cancel: func() { once.Do(func() { close(done); cancel() }) }}
}

// ambiguousClaim is a store whose claim of one action commits but answers
// as a connection broken after the commit was sent (a primary that died),
// and whose reads of that action fail until readsFrom: a failover that
// takes longer than a store call may.
type ambiguousClaim struct {
	queue.Store
	id        string
	readsFrom time.Time
	claimed   atomic.Bool
}

var errConnReset = errors.New("read tcp 127.0.0.1:5432: connection reset by peer")

func (s *ambiguousClaim) ActionTransition(ctx context.Context, p queue.ActionTransitionParams) (*queue.Action, error) {
	a, err := s.Store.ActionTransition(ctx, p)
	if err == nil && p.ID == s.id && p.To == queue.StateInProgress && s.claimed.CompareAndSwap(false, true) {
		return nil, errConnReset
	}
	return a, err
}

func (s *ambiguousClaim) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	if id == s.id && s.claimed.Load() && time.Now().Before(s.readsFrom) {
		return nil, errConnReset
	}
	return s.Store.ActionGetByID(ctx, id)
}

// A claim that committed but was answered with a broken connection is read
// back until the database answers, for as long as a failover may take (12
// s here, past a store call's 10 s), and then performed once: a committed
// claim that nothing performs would become a ticket for an operator.
func TestAmbiguousClaimReadBackOutlastsAFailover(t *testing.T) {
	t.Parallel()
	e := startExec(t, false)
	a := e.Submit("notify_partner", partner("ambiguous", "json"))
	spy := &ambiguousClaim{id: a.ID, readsFrom: time.Now().Add(12 * time.Second)}
	svc := e.AddWrappedProcess(func(st queue.Store) queue.Store { spy.Store = st; return spy }).Service
	e.runDispatcher(svc, nil)
	apptest.Approve(t, e.Service, a.ID)

	deadline := time.Now().Add(40 * time.Second)
	for {
		got, err := e.Store.ActionGetByID(context.Background(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == queue.StateDone {
			break
		}
		if got.State.Final() || time.Now().After(deadline) {
			t.Fatalf("action %s is %s (claimed ambiguously: %v), want done", a.ID, got.State, spy.claimed.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !spy.claimed.Load() || time.Now().Before(spy.readsFrom) {
		t.Fatal("the claim was not answered ambiguously, or the action was done before the reads came back")
	}
	if n := e.prov.deliveries(a.ID); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
}
