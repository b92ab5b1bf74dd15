package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// These tests run the real binary as separate processes on one database,
// against a fake webhook receiver, and kill or stop it mid-delivery.

// processSecret is in the "whsec_" form Standard Webhooks libraries
// generate, so the processes sign with its decoded bytes.
const processSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// receiver is a fake webhook provider that counts deliveries. A payload
// with "respond": "hold" is held open until released (or the connection
// dies); anything else is answered at once.
type receiver struct {
	srv     *httptest.Server
	arrived chan string
	release chan struct{}
	once    sync.Once

	mu    sync.Mutex
	hits  map[string]int
	total int
	bad   []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{arrived: make(chan string, 100), release: make(chan struct{}), hits: map[string]int{}}
	verifier, err := standardwebhooks.NewWebhook(processSecret)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id := req.Header.Get("X-Approvals-Action")
		r.mu.Lock()
		r.total++
		r.hits[id]++
		if err := verifier.Verify(body, req.Header); err != nil {
			r.bad = append(r.bad, "signature of "+id+" refused by the Standard Webhooks library: "+err.Error())
		}
		if req.Header.Get("webhook-id") != id {
			r.bad = append(r.bad, "webhook-id of "+id+" is "+req.Header.Get("webhook-id"))
		}
		if req.Header.Get("Idempotency-Key") == "" {
			r.bad = append(r.bad, "no Idempotency-Key on "+id)
		}
		r.mu.Unlock()
		r.arrived <- id
		if bytes.Contains(body, []byte(`"hold"`)) {
			select {
			case <-r.release:
			case <-req.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"received": %q}`, id)
	}))
	t.Cleanup(r.srv.Close)
	t.Cleanup(r.releaseAll)
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, b := range r.bad {
			t.Error(b)
		}
	})
	return r
}

func (r *receiver) releaseAll() { r.once.Do(func() { close(r.release) }) }

func (r *receiver) count(id string) (one, all int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[id], r.total
}

// deployment is one database, tools file and environment shared by the
// server processes of a test.
// partnerTools deploys notify_partner with the claim and delivery timeouts
// given: generous ones where a delivery must outlast something else (a
// shutdown sequence on a loaded machine), short ones only where a timeout
// is the behaviour under test; and remind, which expires at once.
func partnerTools(hook, claimTimeout, deliveryTimeout string) string {
	return fmt.Sprintf(`
tools:
  notify_partner:
    class: at-most-once
    intent: "partner:{partner}:{topic}"
    claim_timeout: %s
    check: "Search the partner's inbox for the Idempotency-Key."
    executor: { webhook: %q, timeout: %s }
  remind:
    class: at-most-once
    intent: "remind:{topic}"
    expires_after: 300ms
`, claimTimeout, hook, deliveryTimeout)
}

// deploy is a deployment of tools whose processes sweep every 200ms and
// sign with processSecret, with env added.
func deploy(t *testing.T, bin, tools string, env ...string) *apptest.Deployment {
	t.Helper()
	return apptest.NewDeployment(t, bin, apptest.DeploymentOptions{Tools: tools,
		Env: append([]string{"APPROVALS_SWEEP_INTERVAL=200ms", "APPROVALS_WEBHOOK_SECRET=" + processSecret}, env...)})
}

// submitPartner sends one notify_partner action through p's REST API.
func submitPartner(d *apptest.Deployment, p *apptest.Process, topic, respond string) queue.Action {
	d.T.Helper()
	return d.Submit(p, "notify_partner", map[string]any{"partner": "acme", "topic": topic, "respond": respond})
}

func awaitDelivery(t *testing.T, r *receiver, id string) {
	t.Helper()
	select {
	case got := <-r.arrived:
		if got != id {
			t.Fatalf("delivery of %s, want %s", got, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no delivery of %s", id)
	}
}

func TestServerProcessWebhookDelivery(t *testing.T) {
	t.Parallel()
	pgtest.BaseURL(t)
	bin := apptest.BuildBinary(t)

	// A server killed mid-delivery never re-sends it: not on restart, not
	// ever. After claim_timeout the action has exactly one open ticket,
	// and an operator resolving it in the dashboard settles the action.
	t.Run("SIGKILL mid-delivery, restart", func(t *testing.T) {
		t.Parallel()
		rcv := newReceiver(t)
		d := deploy(t, bin, partnerTools(rcv.srv.URL+"/hook", "3s", "2s"))
		first := d.Start()
		a := submitPartner(d, first, "crash", "hold")
		d.Approve(a.ID)
		awaitDelivery(t, rcv, a.ID) // the receiver holds it open

		if err := first.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-first.Exited
		killedAt := time.Now()
		got := d.Action(a.ID)
		if got.State != queue.StateInProgress || got.ClaimedBy == nil || *got.ClaimedBy != queue.DispatcherActor {
			t.Fatalf("after the kill: %s claimed by %v", got.State, got.ClaimedBy)
		}
		if kinds := strings.Join(d.Events(a.ID), " "); kinds != "submitted approved claimed delivery_started" {
			t.Fatalf("timeline after the kill: %s", kinds)
		}

		second := d.Start()
		// The restarted server scans for approved actions at start and
		// sweeps every 200ms; the claim deadline is 3s after the claim.
		var ticket *queue.Ticket
		deadline := time.Now().Add(20 * time.Second)
		for ticket == nil {
			open, err := d.Domain().Store.TicketList(context.Background(), queue.TicketListParams{ActionID: a.ID, State: queue.TicketOpen})
			if err != nil {
				t.Fatal(err)
			}
			if len(open) > 1 {
				t.Fatalf("%d open tickets", len(open))
			}
			if len(open) == 1 {
				ticket = open[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("no ticket %s after the kill; state %s", time.Since(killedAt), d.Action(a.ID).State)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("stale ticket opened %s after the kill", time.Since(killedAt).Round(time.Millisecond))
		// A chance to misbehave, observed rather than slept: the restarted
		// server's dispatcher delivers a later approval (so its start scan
		// is over), and its sweeper expires a later submission (so a whole
		// sweep ran after the ticket was opened).
		marker := submitPartner(d, second, "marker", "now")
		d.Approve(marker.ID)
		awaitDelivery(t, rcv, marker.ID)
		waitDone(t, d, marker.ID)
		reminder := d.Submit(second, "remind", map[string]any{"topic": "after the ticket"})
		if x, err := d.Domain().Polls.Wait(context.Background(), reminder.ID, queue.StatePending, 20*time.Second); err != nil || x.State != queue.StateExpired {
			t.Fatalf("no sweep expired the later submission: %v %+v", err, x)
		}
		if one, all := rcv.count(a.ID); one != 1 || all != 2 {
			t.Fatalf("the receiver got %d deliveries of the action (%d in all, with the marker), want exactly 1 (2)", one, all)
		}
		if one, _ := rcv.count(marker.ID); one != 1 {
			t.Fatalf("the marker was delivered %d times", one)
		}
		if all, _ := d.Domain().Store.TicketList(context.Background(), queue.TicketListParams{ActionID: a.ID}); len(all) != 1 {
			t.Fatalf("%d tickets for the action, want 1", len(all))
		}
		if got := d.Action(a.ID); got.State != queue.StateInProgress {
			t.Fatalf("a ticket released the claim: %s", got.State)
		}

		// An operator checks the partner's inbox and resolves it in the
		// dashboard.
		d.Command("correct horse battery staple\n", "user", "add", "--email", "ops@example.com", "--role", "ops")
		ops := loginDashboard(t, second.URL, "ops@example.com", "correct horse battery staple")
		csrf := ops.csrf("/tickets")
		res := ops.post("/tickets/"+ticket.ID+"/resolve", url.Values{"outcome": {"done"},
			"note": {"found it in the partner's inbox"}, "result": {`{"found": "partner inbox"}`}, "_csrf": {csrf}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("resolve: %d %s", res.StatusCode, readBody(res))
		}
		res.Body.Close()
		got = d.Action(a.ID)
		if got.State != queue.StateDone || !queue.JSONEqual(got.Result, []byte(`{"found": "partner inbox"}`)) ||
			got.Ticket == nil || got.Ticket.State != queue.TicketResolved || got.Ticket.ResolvedBy == nil || *got.Ticket.ResolvedBy != "user:ops@example.com" {
			t.Fatalf("after resolving: %s %s ticket %+v", got.State, got.Result, got.Ticket)
		}
		if one, _ := rcv.count(a.ID); one != 1 {
			t.Fatalf("%d deliveries after resolution", one)
		}
	})

	// SIGTERM stops claiming, lets the delivery under way finish and exits 0.
	t.Run("SIGTERM with a delivery in flight", func(t *testing.T) {
		t.Parallel()
		rcv := newReceiver(t)
		// The held delivery must outlast the whole shutdown sequence.
		d := deploy(t, bin, partnerTools(rcv.srv.URL+"/hook", "5m", "2m"))
		s := d.Start()

		quick := submitPartner(d, s, "quick", "now")
		d.Approve(quick.ID)
		awaitDelivery(t, rcv, quick.ID)
		waitDone(t, d, quick.ID)
		if m := get(t, s.URL+"/metrics"); !strings.Contains(m, `approvals_webhook_deliveries_total{outcome="done"} 1`) {
			t.Errorf("metrics lack the delivery:\n%s", grep(m, "approvals_"))
		}

		held := submitPartner(d, s, "held", "hold")
		late := submitPartner(d, s, "late", "now")
		d.Approve(held.ID)
		awaitDelivery(t, rcv, held.ID)
		// A long-poll on the still pending late action: the server answers
		// it early only once shutdown has stopped the service, which it does
		// after stopping the dispatcher's claims.
		polled := make(chan error, 1)
		go func() {
			req, _ := http.NewRequest("GET", s.URL+"/api/v1/actions/"+late.ID+"?wait=60s", nil)
			req.Header.Set("Authorization", "Bearer "+d.Token)
			res, err := http.DefaultClient.Do(req)
			if err != nil { // the server held the poll: it must answer it
				polled <- fmt.Errorf("long-poll: %w", err)
				return
			}
			var a queue.Action
			b := readBody(res)
			if err := json.Unmarshal([]byte(b), &a); err != nil || a.State != queue.StatePending {
				polled <- fmt.Errorf("long-poll: %d %s", res.StatusCode, b)
				return
			}
			polled <- nil
		}()
		// SIGTERM only once the server holds the poll (the approvals_waiters
		// gauge), so the answer below is shutdown's and nothing else's.
		awaitGauge(t, s.URL, "approvals_waiters", 1)
		if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-polled:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the long-poll was not answered at shutdown")
		}
		// The dispatcher no longer claims: an approval now stays undelivered.
		d.Approve(late.ID)
		select {
		case <-s.Exited:
			t.Fatalf("exited with a delivery in flight: %v", s.Err())
		case <-time.After(500 * time.Millisecond):
		}
		rcv.releaseAll()
		select {
		case <-s.Exited:
		case <-time.After(20 * time.Second):
			t.Fatal("no exit after SIGTERM")
		}
		if s.Err() != nil { // an *exec.ExitError for any status but 0
			t.Fatalf("exit: %v, want status 0", s.Err())
		}
		got := d.Action(held.ID)
		if got.State != queue.StateDone || !queue.JSONEqual(got.Result, []byte(fmt.Sprintf(`{"received": %q}`, held.ID))) {
			t.Fatalf("the delivery in flight: %s %s", got.State, got.Result)
		}
		if one, all := rcv.count(held.ID); one != 1 || all != 2 {
			t.Fatalf("deliveries: %d of the held action, %d in all", one, all)
		}
		if got := d.Action(late.ID); got.State != queue.StateApproved {
			t.Fatalf("the action approved during shutdown: %s, want approved", got.State)
		}
		if kinds := strings.Join(d.Events(late.ID), " "); kinds != "submitted approved" {
			t.Fatalf("timeline of the action approved during shutdown: %s", kinds)
		}
		if one, _ := rcv.count(late.ID); one != 0 {
			t.Fatalf("the action approved during shutdown was delivered %d times", one)
		}
		if log := s.Log(); !strings.Contains(log, "stopped") {
			t.Errorf("no orderly stop in the log:\n%s", log)
		}
	})
}

func waitDone(t *testing.T, d *apptest.Deployment, id string) {
	t.Helper()
	a, err := d.Domain().Polls.Wait(context.Background(), id, queue.StateInProgress, 20*time.Second)
	for err == nil && !a.State.Final() {
		a, err = d.Domain().Polls.Wait(context.Background(), id, a.State, 20*time.Second)
	}
	if err != nil || a.State != queue.StateDone {
		t.Fatalf("action %s: %v %v", id, err, a)
	}
}

// awaitGauge polls the server's /metrics until the gauge reaches want;
// it fails the test after 30 s.
func awaitGauge(t *testing.T, base, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for line := range strings.Lines(get(t, base+"/metrics")) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil && f >= want {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach %v within 30 s", name, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func get(t *testing.T, u string) string {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	return readBody(res)
}

func readBody(res *http.Response) string {
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// staff is a signed-in dashboard browser.
type staff struct {
	t      *testing.T
	URL    string
	client *http.Client
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)"`)

func (s *staff) csrf(path string) string {
	s.t.Helper()
	res, err := s.client.Get(s.URL + path)
	if err != nil {
		s.t.Fatal(err)
	}
	body := readBody(res)
	m := csrfMeta.FindStringSubmatch(body)
	if res.StatusCode != http.StatusOK || m == nil {
		s.t.Fatalf("GET %s: %d, no csrf-token meta", path, res.StatusCode)
	}
	return m[1]
}

func (s *staff) post(path string, form url.Values) *http.Response {
	s.t.Helper()
	res, err := s.client.PostForm(s.URL+path, form)
	if err != nil {
		s.t.Fatal(err)
	}
	return res
}

func loginDashboard(t *testing.T, base, email, password string) *staff {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &staff{t: t, URL: base, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	csrf := s.csrf("/login")
	res := s.post("/login", url.Values{"email": {email}, "password": {password}, "_csrf": {csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d %s", res.StatusCode, readBody(res))
	}
	res.Body.Close()
	return s
}
