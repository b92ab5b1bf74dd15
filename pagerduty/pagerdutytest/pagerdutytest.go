// Package pagerdutytest is a local PagerDuty Events API v2 for tests: POST /v2/enqueue checks
// each event as PagerDuty does (the routing key, event_action, dedup_key, a trigger's
// summary, source and severity), answers 202 with the dedup key or 400 with the errors, and
// keeps the incidents it opened and resolved.
package pagerdutytest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Event is one event received, as PagerDuty reads it.
type Event struct {
	RoutingKey  string `json:"routing_key"`
	EventAction string `json:"event_action"`
	DedupKey    string `json:"dedup_key"`
	Payload     *struct {
		Summary       string            `json:"summary"`
		Source        string            `json:"source"`
		Severity      string            `json:"severity"`
		Timestamp     string            `json:"timestamp"`
		Class         string            `json:"class"`
		Component     string            `json:"component"`
		CustomDetails map[string]string `json:"custom_details"`
	} `json:"payload"`
	Links []struct {
		Href string `json:"href"`
		Text string `json:"text"`
	} `json:"links"`
	// Accepted says the event was answered 202.
	Accepted bool `json:"-"`
}

// Server is the Events API.
type Server struct {
	URL string // the value of APPROVALS_PAGERDUTY_URL
	key string

	mu      sync.Mutex
	events  []Event
	open    map[string]bool // dedup key → triggered and not resolved
	fail    []int
	hold    bool
	changed chan struct{}
}

// New starts an Events API that accepts routingKey; it stops when the test ends.
func New(t testing.TB, routingKey string) *Server {
	t.Helper()
	s := &Server{key: routingKey, open: map[string]bool{}, changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// FailNext makes the next requests answer these statuses (429, 500), one each.
func (s *Server) FailNext(status ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = append(s.fail, status...)
}

// Hold keeps every request open until its client goes away (a sender killed mid-send).
func (s *Server) Hold(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = on
}

// Events returns the events received so far.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Open reports whether an incident with dedupKey was triggered and is not resolved.
func (s *Server) Open(dedupKey string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[dedupKey]
}

// WaitFor waits until n events of action (trigger, resolve) were accepted and returns them;
// it fails the test after timeout.
func (s *Server) WaitFor(t testing.TB, action string, n int, timeout time.Duration) []Event {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		var got []Event
		for _, e := range s.events {
			if e.Accepted && e.EventAction == action {
				got = append(got, e)
			}
		}
		s.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("pagerdutytest: %d accepted %s events after %s, want %d", len(got), action, timeout, n)
		}
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var e Event
	var errs []string
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v2/enqueue":
		http.NotFound(w, r)
		return
	case json.Unmarshal(body, &e) != nil:
		errs = append(errs, "Body is not JSON")
	default:
		errs = check(e, s.key)
	}
	s.mu.Lock()
	status, hold := http.StatusAccepted, s.hold
	if len(s.fail) > 0 && len(errs) == 0 {
		status, s.fail = s.fail[0], s.fail[1:]
	}
	e.Accepted = len(errs) == 0 && status == http.StatusAccepted && !hold
	if e.Accepted {
		switch e.EventAction {
		case "trigger":
			s.open[e.DedupKey] = true
		case "resolve":
			delete(s.open, e.DedupKey)
		}
	}
	s.events = append(s.events, e)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if hold {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case len(errs) > 0:
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "invalid event", "message": "Event object is invalid", "errors": errs})
	case status != http.StatusAccepted:
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "throttle event", "message": "Requests for this service are arriving too quickly."})
	default:
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "message": "Event processed", "dedup_key": e.DedupKey})
	}
}

// check is what PagerDuty refuses an event for.
func check(e Event, key string) []string {
	var errs []string
	if e.RoutingKey != key {
		errs = append(errs, "Invalid routing key")
	}
	if !slices.Contains([]string{"trigger", "acknowledge", "resolve"}, e.EventAction) {
		errs = append(errs, "'event_action' is invalid (must be one of the following: 'trigger', 'acknowledge' or 'resolve')")
	}
	if len(e.DedupKey) > 255 {
		errs = append(errs, "'dedup_key' must be at most 255 characters")
	}
	if e.EventAction != "trigger" {
		if e.DedupKey == "" {
			errs = append(errs, "'dedup_key' is missing or blank")
		}
		return errs
	}
	p := e.Payload
	switch {
	case p == nil:
		errs = append(errs, "'payload' is missing")
	default:
		if p.Summary == "" || len([]rune(p.Summary)) > 1024 {
			errs = append(errs, "'payload.summary' is missing, blank or longer than 1024 characters")
		}
		if p.Source == "" {
			errs = append(errs, "'payload.source' is missing or blank")
		}
		if !slices.Contains([]string{"critical", "error", "warning", "info"}, p.Severity) {
			errs = append(errs, "'payload.severity' is invalid (must be one of the following: 'critical', 'warning', 'error' or 'info')")
		}
		if p.Timestamp != "" {
			if _, err := time.Parse(time.RFC3339, p.Timestamp); err != nil {
				errs = append(errs, "'payload.timestamp' is not ISO 8601")
			}
		}
	}
	return errs
}
