package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/web"
)

// countingStore counts the per-state count queries /metrics runs.
type countingStore struct {
	storage.Store
	counts atomic.Int64
}

func (s *countingStore) ActionCountByState(ctx context.Context) (map[queue.State]int64, error) {
	s.counts.Add(1)
	return s.Store.ActionCountByState(ctx)
}

// TestMetricsCountsCached: however often /metrics is scraped, concurrently
// too, the actions table is counted at most once per 15 seconds, and a
// count older than that is read again.
func TestMetricsCountsCached(t *testing.T) {
	t.Parallel()
	for name, onSQLite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cs := &countingStore{}
			clock := testclock.Frozen()
			a := apptest.Start(t, apptest.Options{SQLite: onSQLite, Clock: clock,
				WrapAll: func(s storage.Store) storage.Store { cs.Store = s; return cs }})
			// Its own connections, closed before the process shuts down: a
			// connection dialled for a concurrent scrape but never used
			// would hold Shutdown for 5 seconds (http.Server counts a new
			// connection idle only then).
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr, Timeout: time.Minute}
			scrape := func() string {
				res, err := client.Get(a.URL + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return string(b)
			}
			if body := scrape(); !strings.Contains(body, `approvals_actions{state="pending"} 0`) {
				t.Fatalf("first scrape: no pending count in\n%s", body)
			}
			if _, err := a.Service.Submit(t.Context(), queue.SubmitRequest{Tool: "send_customer_email", Agent: "bot",
				Payload: []byte(`{"customer_id":"c1","topic":"t","to":"c@example.com","subject":"s","body":"b"}`)}); err != nil {
				t.Fatal(err)
			}
			apptest.RunConcurrently(20, func(int) string { return scrape() })
			clock.Advance(countsMaxAgeMinusOne)
			if body := scrape(); !strings.Contains(body, `approvals_actions{state="pending"} 0`) {
				t.Fatal("a count younger than 15s was read again")
			}
			if n := cs.counts.Load(); n != 1 {
				t.Fatalf("%d count queries for 22 scrapes within 15s, want 1", n)
			}
			clock.Advance(time.Second)
			if body := scrape(); !strings.Contains(body, `approvals_actions{state="pending"} 1`) {
				t.Fatalf("after 15s the count was not read again:\n%s", body)
			}
			if n := cs.counts.Load(); n != 2 {
				t.Fatalf("%d count queries, want 2", n)
			}
		})
	}
}

const countsMaxAgeMinusOne = web.CountsMaxAge - time.Second

// TestMetricsElsewhere: with APPROVALS_METRICS_ADDR the main listener
// answers 404 at /metrics, and the listener of that address serves them.
func TestMetricsElsewhere(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{MetricsAddr: "127.0.0.1:0"})
	if a.MetricsURL == "" || a.MetricsURL == a.URL {
		t.Fatalf("metrics listener %q beside main listener %q", a.MetricsURL, a.URL)
	}
	res, err := http.Get(a.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("main listener /metrics: %d, want 404", res.StatusCode)
	}
	res, err = http.Get(a.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), "approvals_actions") {
		t.Fatalf("metrics listener: %d %s", res.StatusCode, b)
	}
}
