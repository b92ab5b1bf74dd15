package handlers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// lostResponse is a transport that loses the response of the first
// request lose matches, after the server has fully handled it: the caller
// sees a timeout while the effect happened.
type lostResponse struct {
	next http.RoundTripper
	lose func(*http.Request) bool
	once sync.Once
	lost atomic.Bool
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "timeout awaiting response headers" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func (l *lostResponse) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := l.next.RoundTrip(r)
	if err != nil || !l.lose(r) {
		return res, err
	}
	drop := false
	l.once.Do(func() { drop = true })
	if !drop {
		return res, nil
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	l.lost.Store(true)
	return nil, timeoutError{} // the client wraps it as *url.Error, as a real timeout
}

// payments is a fake payment provider: POST /refunds makes a refund (a
// real effect), GET /refunds?order=O&line=L lists the refunds of a line,
// which is what issue_refund's check tells an agent to look at.
type payments struct {
	srv     *httptest.Server
	mu      sync.Mutex
	refunds map[string][]string // "order/line" → refund ids
	effects int
}

func newPayments(t *testing.T) *payments {
	p := &payments{refunds: map[string][]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		line := r.URL.Query().Get("order") + "/" + r.URL.Query().Get("line")
		if r.Method == http.MethodPost {
			p.effects++
			id := fmt.Sprintf("re_%d", p.effects)
			p.refunds[line] = append(p.refunds[line], id)
			fmt.Fprintf(w, `{"id":%q}`, id)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string][]string{"refunds": p.refunds[line]})
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// refundAgent is an agent written to follow the guidance of an
// exactly-once tool: a 201 in_progress is its claim; it performs the
// effect once and reports it; after a timeout or an error it never retries
// blindly, but reads the action (and, for an effect whose outcome it does
// not know, the provider, as the tool's check says) first.
type refundAgent struct {
	e           *apptest.API
	base, token string
	name        string
	pay         *http.Client
	payURL      string
	order, line string
	trace       []string
	t           *testing.T
	reads       int // reads of the action before any retry
}

func (g *refundAgent) logf(format string, args ...any) {
	g.trace = append(g.trace, fmt.Sprintf(format, args...))
}

// run returns the action as it finally is.
func (g *refundAgent) run() queue.Action {
	body := map[string]any{"tool": "issue_refund", "payload": map[string]any{"order_id": g.order, "line_id": g.line, "amount": 30, "currency": "EUR"}}
	key := "refund:" + g.order + ":" + g.line
	var claim queue.Action
	for attempt := 1; claim.ID == ""; attempt++ {
		if attempt > 5 {
			g.t.Fatalf("no claim after %d submissions: %q", attempt-1, g.trace)
		}
		r, err := g.e.Try(g.base, g.token, "POST", "/api/v1/actions", body)
		switch {
		case err != nil:
			// The claim's response was lost. Repeating the submission is
			// safe: it is behind the intent guard, not the effect itself.
			g.logf("submit: %v", err)
			continue
		case r.Status == http.StatusCreated:
			claim = r.Action(g.t)
			g.logf("submit: 201, my claim")
		case r.Status == http.StatusConflict && r.Problem(g.t).Code == queue.CodeInProgress:
			// Someone holds the claim: do not act; read the intent.
			g.logf("submit: 409 in_progress")
			list := g.e.Do(g.base, g.token, "GET", "/api/v1/actions?intent_key="+url.QueryEscape(key), nil)
			g.reads++
			var l struct{ Actions []queue.Action }
			_ = json.Unmarshal(list.Body, &l)
			if len(l.Actions) == 0 || l.Actions[0].State != queue.StateInProgress {
				g.t.Fatalf("read after 409: %s", list.Body)
			}
			if l.Actions[0].RequestedBy != "agent:"+g.name {
				g.logf("read: another agent holds the claim; waiting for its outcome")
				return g.waitFinal(l.Actions[0].ID)
			}
			// Our own claim, whose response we lost: we have not acted yet.
			claim = l.Actions[0]
			g.logf("read: the claim in progress is mine (claimed at %s)", claim.ClaimedAt.Format(time.RFC3339))
		case r.Status == http.StatusOK:
			g.logf("submit: 200, stored outcome %s", r.Action(g.t).State)
			return r.Action(g.t)
		default:
			g.t.Fatalf("submit: %d %s", r.Status, r.Body)
		}
	}

	result, err := g.refund()
	if err != nil {
		// The effect's outcome is unknown: never retry it blindly. Read the
		// action, then check the provider as the tool says.
		g.logf("effect: %v", err)
		a := g.e.Do(g.base, g.token, "GET", "/api/v1/actions/"+claim.ID, nil).Action(g.t)
		g.reads++
		if a.State != queue.StateInProgress || !queue.JSONEqual(a.Result, []byte("null")) {
			g.t.Fatalf("read after the effect timed out: %s", a.State)
		}
		found := g.listRefunds()
		g.logf("check: refunds on the line %v", found)
		if len(found) > 0 {
			result = json.RawMessage(fmt.Sprintf(`{"id":%q}`, found[0]))
		} else if result, err = g.refund(); err != nil { // checked: it did not happen
			g.t.Fatalf("second refund: %v", err)
		}
	}
	done := g.e.Do(g.base, g.token, "POST", "/api/v1/actions/"+claim.ID+"/complete", map[string]any{"result": result})
	if done.Status != http.StatusOK {
		g.t.Fatalf("complete: %d %s", done.Status, done.Body)
	}
	g.logf("complete: %s", done.Action(g.t).State)
	return done.Action(g.t)
}

func (g *refundAgent) refund() (json.RawMessage, error) {
	res, err := g.pay.Post(g.payURL+"/refunds?order="+g.order+"&line="+g.line, "application/json", strings.NewReader(`{"amount":30}`))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return b, err
}

func (g *refundAgent) listRefunds() []string {
	res, err := g.pay.Get(g.payURL + "/refunds?order=" + g.order + "&line=" + g.line)
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	var l struct{ Refunds []string }
	_ = json.NewDecoder(res.Body).Decode(&l)
	return l.Refunds
}

func (g *refundAgent) waitFinal(id string) queue.Action {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			g.t.Fatalf("action %s not final within a minute", id)
		}
		a := g.e.Do(g.base, g.token, "GET", "/api/v1/actions/"+id+"?wait=20s", nil).Action(g.t)
		if a.State.Final() {
			return a
		}
	}
}

// An agent whose first call times out and whose second would succeed,
// written to follow the guidance, makes exactly one real effect: whether
// it lost the response of its claim or of the effect itself.
func TestAgentFollowingGuidanceMakesOneEffect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		loseClaim bool
		want      []string // the agent's reasoning, in order
	}{
		{"the claim's response is lost", true, []string{"submit: ", "submit: 409 in_progress", "read: the claim in progress is mine", "complete: done"}},
		{"the effect's response is lost", false, []string{"submit: 201, my claim", "effect: ", "check: refunds on the line [re_1]", "complete: done"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := apptest.StartAPI(t, apptest.Options{})
			pay := newPayments(t)
			api := &lostResponse{next: http.DefaultTransport, lose: func(r *http.Request) bool {
				return tc.loseClaim && r.Method == "POST" && r.URL.Path == "/api/v1/actions"
			}}
			e.Client = &http.Client{Transport: api}
			effect := &lostResponse{next: http.DefaultTransport, lose: func(r *http.Request) bool {
				return !tc.loseClaim && r.Method == "POST"
			}}
			g := &refundAgent{e: e, base: e.URL, token: e.AgentToken, name: "bot", t: t,
				pay: &http.Client{Transport: effect}, payURL: pay.srv.URL, order: "o-42", line: "1"}
			final := g.run()
			t.Logf("agent: %s", strings.Join(g.trace, " → "))
			if !api.lost.Load() && !effect.lost.Load() {
				t.Fatal("no response was lost")
			}
			pay.mu.Lock()
			effects := pay.effects
			pay.mu.Unlock()
			if effects != 1 {
				t.Fatalf("%d real refunds, want exactly 1", effects)
			}
			if final.State != queue.StateDone || !queue.JSONEqual(final.Result, []byte(`{"id":"re_1"}`)) {
				t.Fatalf("final action: %s %s", final.State, final.Result)
			}
			if g.reads == 0 {
				t.Fatal("the agent never read the action before going on")
			}
			if len(g.trace) != len(tc.want) {
				t.Fatalf("agent trace %q, want %q", g.trace, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(g.trace[i], w) {
					t.Fatalf("agent step %d: %q, want %q…", i, g.trace[i], w)
				}
			}
			// The intent holds exactly one action, attempt 1.
			list := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions?intent_key=refund:o-42:1", nil)
			var l struct{ Actions []queue.Action }
			_ = json.Unmarshal(list.Body, &l)
			if len(l.Actions) != 1 || l.Actions[0].Attempt != 1 {
				t.Fatalf("actions of the intent: %s", list.Body)
			}
		})
	}
}

// The agent's long-poll sees an expiry made by another process's sweep.
func TestLongPollSeesExpiry(t *testing.T) {
	t.Parallel()
	// A frozen clock: the sweep one second before expires_at must not
	// expire it however slow the machine is.
	e := apptest.StartAPI(t, apptest.Options{Clock: testclock.Frozen()})
	// Another server process on the same database holds the long-poll;
	// its fallback re-read (a minute) is longer than this test's waits, so
	// only the sweep's notification can wake the poll.
	other := e.App.AddServer(t, nil)
	a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-50", "expiry")).Action(t)
	got := make(chan resp, 1)
	errc := make(chan error, 1)
	go func() {
		r, err := e.Try(other.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID+"?wait=30s", nil)
		errc <- err
		got <- r
	}()
	// The poll has subscribed, read the action pending and waits.
	other.AwaitWaiters(t, 1)
	e.Advance(72*time.Hour - time.Second)
	if res, err := e.App.Sweeper.Sweep(t.Context()); err != nil || len(res.Expired) != 0 {
		t.Fatalf("sweep before expires_at: %v %d", err, len(res.Expired))
	}
	e.Advance(time.Second)
	swept := time.Now()
	if res, err := e.App.Sweeper.Sweep(t.Context()); err != nil || len(res.Expired) != 1 {
		t.Fatalf("sweep at expires_at: %v %d", err, len(res.Expired))
	}
	var r resp
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
		r = <-got
	case <-time.After(20 * time.Second):
		t.Fatal("the long-poll did not answer after the sweep")
	}
	// Wall-clock lag depends on the machine's load: logged, not asserted.
	t.Logf("the long-poll answered %s after the sweep", time.Since(swept))
	if x := r.Action(t); x.State != queue.StateExpired || x.DecidedBy == nil || *x.DecidedBy != "system" {
		t.Fatalf("long-poll: %s", r.Body)
	}
	// Expiry released the intent: the same submission is attempt 2.
	again := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-50", "expiry"))
	if again.Status != http.StatusCreated || again.Action(t).Attempt != 2 {
		t.Fatalf("resubmit after expiry: %d %s", again.Status, again.Body)
	}
}

// Through the API: an agent submits to a webhook tool, a person approves,
// the dispatcher delivers once, and the agent's long-poll ends in done with
// the provider's response. The agent cannot execute or finish it itself.
func TestWebhookActionThroughAPI(t *testing.T) {
	t.Parallel()
	const secret = "api-test-secret"
	var (
		mu     sync.Mutex
		bodies []string
	)
	verifier, err := standardwebhooks.NewWebhookRaw([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := verifier.Verify(b, r.Header); err != nil {
			t.Errorf("the Standard Webhooks library refused the delivery: %v (headers %v)", err, r.Header)
		}
		if r.Header.Get("Idempotency-Key") != "partner:acme:hello" || r.Header.Get("webhook-id") != r.Header.Get("X-Approvals-Action") {
			t.Errorf("delivery headers %v", r.Header)
		}
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"delivered": true}`)
	}))
	t.Cleanup(hook.Close)
	reg, err := classify.Parse([]byte(fmt.Sprintf(`
tools:
  notify_partner:
    class: at-most-once
    intent: "partner:{partner}:{topic}"
    claim_timeout: 1m
    executor: { webhook: %q, timeout: 30s }
`, hook.URL)), classify.Options{WebhookSecretSet: true})
	if err != nil {
		t.Fatal(err)
	}
	// The process's own dispatcher delivers, signing with its secret.
	e := apptest.StartAPI(t, apptest.Options{Tools: reg, WebhookSecret: secret})

	sub := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", map[string]any{"tool": "notify_partner",
		"payload": map[string]any{"partner": "acme", "topic": "hello", "text": "Hi"}})
	a := sub.Action(t)
	if sub.Status != http.StatusCreated || a.State != queue.StatePending {
		t.Fatalf("submit: %d %s", sub.Status, sub.Body)
	}
	edited := json.RawMessage(`{"partner": "acme", "topic": "hello", "text": "Hi (edited)"}`)
	if _, err := e.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com", Payload: edited}); err != nil {
		t.Fatal(err)
	}
	var final queue.Action
	deadline := time.Now().Add(60 * time.Second)
	for state := queue.StatePending; !state.Final(); state = final.State {
		if time.Now().After(deadline) {
			t.Fatalf("action %s still %s after a minute", a.ID, state)
		}
		final = e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID+"?wait=20s&state="+string(state), nil).Action(t)
	}
	if final.State != queue.StateDone || !queue.JSONEqual(final.Result, []byte(`{"delivered": true}`)) {
		t.Fatalf("final: %s %s", final.State, final.Result)
	}
	mu.Lock()
	if len(bodies) != 1 || !queue.JSONEqual([]byte(bodies[0]), edited) {
		t.Errorf("deliveries %q, want the approved payload once", bodies)
	}
	mu.Unlock()
	if n := e.App.Metric(t, `approvals_webhook_deliveries_total{outcome="done"}`); n != 1 {
		t.Errorf("approvals_webhook_deliveries_total{outcome=done} = %v, want 1", n)
	}
	for verb, body := range map[string]any{"execute": nil, "complete": `{"result":{}}`, "fail": `{"error":"x"}`} {
		r := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions/"+a.ID+"/"+verb, body)
		if r.Status != http.StatusConflict || r.Problem(t).Code != queue.CodeInvalidTransition {
			t.Errorf("agent %s of a webhook action: %d %s", verb, r.Status, r.Body)
		}
	}
}
