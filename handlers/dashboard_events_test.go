package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestDashboardEventsAcrossServers opens the event stream on one server
// and submits through another server process sharing the database: the
// change arrives (typically within 50 ms; the test logs how long it took).
// Then a decision made through the other process arrives too, naming the
// action.
func TestDashboardEventsAcrossServers(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	b := d.SignIn("ann@example.com", accounts.RoleViewer)

	// A second server process on the same database: its own pool, LISTEN
	// connection and HTTP listener; the agent submits through its API.
	other := d.App.AddServer(t, nil)
	token := other.Token(t, "bot")

	// The bound is for a stuck test, not a latency target: the latencies are
	// logged (timed assertions do not belong in the suite).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/events", nil)
	res, err := b.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if first := <-lines; !strings.HasPrefix(first, "retry:") {
		t.Fatalf("first line %q", first)
	}
	// PostgreSQL announces new pending rows by a poll, which may send one
	// change as soon as someone listens; let that pass first.
	settle := time.After(1500 * time.Millisecond)
wait:
	for {
		select {
		case l := <-lines:
			if strings.HasPrefix(l, "data: ") {
				break wait
			}
		case <-settle:
			break wait
		}
	}

	submitted := time.Now()
	sreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, other.URL+"/api/v1/actions", strings.NewReader(
		`{"tool":"send_customer_email","payload":{"customer_id":"c9","topic":"t","to":"c@example.com","subject":"Live","body":"B"}}`))
	sreq.Header.Set("Authorization", "Bearer "+token)
	sreq.Header.Set("Content-Type", "application/json")
	sres, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Action queue.Action }
	err = json.NewDecoder(sres.Body).Decode(&r.Action)
	sres.Body.Close()
	if err != nil || sres.StatusCode != http.StatusCreated {
		t.Fatalf("submit through the other server: %d %v", sres.StatusCode, err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended")
			}
			// The change names the action, or (a poll) only says that new
			// pending actions exist.
			if strings.HasPrefix(l, "data: ") && strings.Contains(l, `"state":"pending"`) &&
				(strings.Contains(l, r.Action.ID) || strings.Contains(l, `"id":""`)) {
				t.Logf("new pending action announced %s after the submission", time.Since(submitted).Round(time.Millisecond))
				break
			}
			continue
		case <-deadline:
			t.Fatal("no change event within 10 s of the submission")
		}
		break
	}

	decided := time.Now()
	if _, err := other.Service.Decide(ctx, queue.DecideRequest{To: queue.StateRejected, ID: r.Action.ID, By: "user:ann@example.com", Note: "no"}); err != nil {
		t.Fatal(err)
	}
	deadline = time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended")
			}
			if strings.HasPrefix(l, "data: ") && strings.Contains(l, r.Action.ID) && strings.Contains(l, `"rejected"`) {
				t.Logf("decision announced %s after it was made", time.Since(decided).Round(time.Millisecond))
				return
			}
		case <-deadline:
			t.Fatal("no change event within 10 s of the decision")
		}
	}
}

// TestDashboardEventsEndWithDone ends open streams when shutdown begins
// (the process passes Service.Stopping as Config.Done), so a graceful
// shutdown does not wait for browsers.
func TestDashboardEventsEndWithDone(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	b := d.SignIn("ann@example.com", accounts.RoleViewer)
	res, err := b.Client.Get(d.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	ended := make(chan struct{})
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := res.Body.Read(buf); err != nil {
				close(ended)
				return
			}
		}
	}()
	d.App.ReleaseWaits()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open after shutdown began")
	}
}
