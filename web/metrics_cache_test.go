package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/queue/postgres/pgtest"
	"github.com/approvals/approvals/queue/sqlite"
	"github.com/approvals/approvals/queue/storetest"
	"github.com/approvals/approvals/web"
)

// countingStore counts the per-state count queries /metrics runs.
type countingStore struct {
	storetest.Store
	counts atomic.Int64
}

func (s *countingStore) ActionCountByState(ctx context.Context) (map[queue.State]int64, error) {
	s.counts.Add(1)
	return s.Store.ActionCountByState(ctx)
}

// fixedClock is a clock a test moves by hand.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openStores(t *testing.T) map[string]storetest.Store {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "approvals.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return map[string]storetest.Store{"postgres": pgtest.Open(t), "sqlite": s}
}

// TestMetricsCountsCached: however often /metrics is scraped, concurrently
// too, the actions table is counted at most once per 15 seconds, and a
// count older than that is read again.
func TestMetricsCountsCached(t *testing.T) {
	t.Parallel()
	for name, st := range openStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cs := &countingStore{Store: st}
			clock := &fixedClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			svc := queue.NewService(cs, exampleRegistry(t), queue.Options{})
			t.Cleanup(svc.Stop)
			srv, err := web.New(web.Config{Service: svc, Accounts: st, Metrics: web.NewMetrics(cs, web.MetricsClock(clock.now))})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			t.Cleanup(hs.Close)
			scrape := func() string {
				res, err := http.Get(hs.URL + "/metrics")
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
			if _, err := svc.Submit(t.Context(), queue.SubmitRequest{Tool: "send_customer_email", Agent: "bot",
				Payload: []byte(`{"customer_id":"c1","topic":"t","to":"c@example.com","subject":"s","body":"b"}`)}); err != nil {
				t.Fatal(err)
			}
			runConcurrently(20, func(int) string { return scrape() })
			clock.advance(countsMaxAgeMinusOne)
			if body := scrape(); !strings.Contains(body, `approvals_actions{state="pending"} 0`) {
				t.Fatal("a count younger than 15s was read again")
			}
			if n := cs.counts.Load(); n != 1 {
				t.Fatalf("%d count queries for 22 scrapes within 15s, want 1", n)
			}
			clock.advance(time.Second)
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
// answers 404 at /metrics, and MetricsHandler serves them.
func TestMetricsElsewhere(t *testing.T) {
	t.Parallel()
	st := pgtest.Open(t)
	svc := queue.NewService(st, exampleRegistry(t), queue.Options{})
	t.Cleanup(svc.Stop)
	srv, err := web.New(web.Config{Service: svc, Accounts: st, MetricsElsewhere: true})
	if err != nil {
		t.Fatal(err)
	}
	main := httptest.NewServer(srv.Handler())
	t.Cleanup(main.Close)
	metrics := httptest.NewServer(srv.MetricsHandler())
	t.Cleanup(metrics.Close)
	res, err := http.Get(main.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("main listener /metrics: %d, want 404", res.StatusCode)
	}
	res, err = http.Get(metrics.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), "approvals_actions") {
		t.Fatalf("metrics listener: %d %s", res.StatusCode, b)
	}
}
