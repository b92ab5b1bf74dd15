package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/notifier/webhook"
	"github.com/approvals/approvals/queue"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// receiver is a webhook endpoint that verifies every request with the official Standard
// Webhooks library and records what it received.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	status int
	mu     sync.Mutex
	got    []received
}

type received struct {
	header http.Header
	body   []byte
	err    error // the official library's verdict
}

func newReceiver(t *testing.T, status int) *receiver {
	t.Helper()
	r := &receiver{t: t, status: status}
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body, err: verifier.Verify(body, req.Header)})
		r.mu.Unlock()
		if r.status >= 300 && r.status < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(r.status)
		_, _ = io.WriteString(w, "receiver says "+strconv.Itoa(r.status))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func newNotifier(t *testing.T, timeout time.Duration) *webhook.Notifier {
	t.Helper()
	n, err := webhook.New(webhook.Config{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func sampleAction() *queue.Action {
	note := "looks <fine> & sent"
	by := "user:ann@example.com"
	decided := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	return &queue.Action{
		ID: "0190a-action", Tool: "send_customer_email", Class: classify.AtMostOnce,
		IntentKey: "refund:42", Attempt: 1, State: queue.StateApproved,
		Payload: json.RawMessage(`{"to": "c@example.com", "subject": "Refund"}`), ApprovedPayload: json.RawMessage(`{"to":"c@example.com","subject":"Refund"}`),
		RequestedBy: "agent:support-bot", DecidedBy: &by, DecisionNote: &note,
		CreatedAt: decided.Add(-time.Hour), DecidedAt: &decided,
	}
}

func sampleNotification(url string) queue.Notification {
	return queue.Notification{
		ID: "0190n-notification", Type: classify.EventActionApproved,
		Channel:    classify.Channel{Name: "ops-events", Webhook: url, Secret: secret},
		Action:     sampleAction(),
		OccurredAt: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), Attempt: 1,
	}
}

// A delivery carries the event envelope with the action as the REST API writes it, and
// signature headers that the official Standard Webhooks library accepts.
func TestNotifyPostsSignedEvent(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, http.StatusOK)
	n := sampleNotification(r.srv.URL + "/events")
	if err := send(newNotifier(t, 0), n); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	got := r.requests()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	req := got[0]
	if req.err != nil {
		t.Fatalf("official library refused the signature: %v", req.err)
	}
	if id := req.header.Get("webhook-id"); id != n.ID {
		t.Fatalf("webhook-id %q, want the notification id %q", id, n.ID)
	}
	if ct := req.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var env struct {
		ID        string                     `json:"id"`
		Type      string                     `json:"type"`
		Timestamp string                     `json:"timestamp"`
		Data      map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(req.body, &env); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, req.body)
	}
	if env.ID != n.ID || env.Type != "action.approved" || env.Timestamp != "2026-03-04T05:06:07Z" {
		t.Fatalf("envelope id=%q type=%q timestamp=%q", env.ID, env.Type, env.Timestamp)
	}
	if _, ok := env.Data["ticket"]; ok {
		t.Fatalf("an action event carries a ticket: %s", req.body)
	}
	// The REST API writes actions with its own encoder, byte for byte as
	// encoding/json does (handlers' TestAppendJSONMatchesEncodingJSON).
	want, err := json.Marshal(n.Action)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(env.Data["action"], want) {
		t.Fatalf("data.action is not the REST encoding:\n got %s\nwant %s", env.Data["action"], want)
	}
}

// ticket.opened carries the ticket beside the action.
func TestNotifyTicketEventCarriesTicket(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, http.StatusNoContent)
	n := sampleNotification(r.srv.URL)
	n.Type = classify.EventTicketOpened
	n.Ticket = &queue.Ticket{ID: "17", ActionID: n.Action.ID, Kind: queue.TicketStale, State: queue.TicketOpen, OpenedAt: n.OccurredAt}
	if err := send(newNotifier(t, 0), n); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	var env struct {
		Data struct {
			Ticket map[string]any `json:"ticket"`
			Action map[string]any `json:"action"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.requests()[0].body, &env); err != nil {
		t.Fatal(err)
	}
	if env.Data.Ticket["id"] != "17" || env.Data.Ticket["kind"] != "stale" || env.Data.Action["id"] != n.Action.ID {
		t.Fatalf("ticket event data %+v", env.Data)
	}
}

// Anything but 2xx is a failure to retry; a redirect is not followed.
func TestNotifyNon2xxIsError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		want   string
	}{
		{http.StatusOK, ""},
		{http.StatusAccepted, ""},
		{http.StatusFound, "redirects are not followed"},
		{http.StatusTemporaryRedirect, "redirects are not followed"},
		{http.StatusBadRequest, "400"},
		{http.StatusInternalServerError, "receiver says 500"},
		{http.StatusServiceUnavailable, "503"},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			t.Parallel()
			r := newReceiver(t, tc.status)
			err := send(newNotifier(t, 0), sampleNotification(r.srv.URL))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("status %d: %v, want delivered", tc.status, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("status %d: error %v, want one containing %q", tc.status, err, tc.want)
			}
			if n := len(r.requests()); n != 1 {
				t.Fatalf("receiver got %d requests, want exactly 1 (no redirect followed)", n)
			}
		})
	}
}

// A receiver that does not answer within the timeout is an error, and so is one that is
// down; neither error shows the credentials in the URL.
func TestNotifyTimeoutAndDownKeepCredentialsOut(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	for name, base := range map[string]string{"timeout": slow.URL, "down": down.URL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			withCreds := strings.Replace(base, "http://", "http://hook:hunter2@", 1) + "/events?access_token=s3cr3t&team=blue"
			start := time.Now()
			err := send(newNotifier(t, 200*time.Millisecond), sampleNotification(withCreds))
			if err == nil {
				t.Fatal("want an error")
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("Notify took %s despite a 200ms timeout", time.Since(start))
			}
			for _, secret := range []string{"hunter2", "s3cr3t"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error shows a credential: %v", err)
				}
			}
			if !strings.Contains(err.Error(), "team=blue") {
				t.Fatalf("error should still name the URL: %v", err)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://example.com/hook", "https://example.com/hook"},
		{"https://u:p@example.com/hook", "https://redacted@example.com/hook"},
		{"https://example.com/hook?token=abc&x=1", "https://example.com/hook?token=redacted&x=1"},
		{"https://example.com/hook?api_key=abc&Secret=d&sig=e", "https://example.com/hook?Secret=redacted&api_key=redacted&sig=redacted"},
		{"http://[::1:bad", "(unparsable URL)"},
	} {
		if got := webhook.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// send renders n and sends it, as the outbox does for a webhook channel.
func send(w *webhook.Notifier, n queue.Notification) error {
	body, err := w.Render(n)
	if err != nil {
		return err
	}
	_, err = w.Send(context.Background(), n, body)
	return err
}
