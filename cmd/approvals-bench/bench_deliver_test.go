package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The receiver records the first action.pending of each action and the
// first delivery of each execution, and nothing else; wait returns once
// every id sent arrived, or at its deadline with what did.
func TestDeliveryReceiverRecordsFirstArrivals(t *testing.T) {
	t.Parallel()
	rec := newDeliveryReceiver()
	srv := httptest.NewServer(rec)
	defer srv.Close()
	post := func(path, body string, hdr ...string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s answered %d", path, res.StatusCode)
		}
	}
	post("/events", `{"type":"action.pending","data":{"action":{"id":"a1"}}}`)
	post("/events", `{"type":"action.approved","data":{"action":{"id":"a2"}}}`) // not a pending event
	post("/events", `not json`)
	post("/execute", `{}`, "X-Approvals-Action", "e1")
	post("/execute", `{}`) // no action header

	sent := map[string]time.Time{"a1": time.Now(), "a2": time.Now()}
	start := time.Now()
	got := rec.wait(rec.events, sent, 200*time.Millisecond)
	if _, ok := got["a1"]; !ok || len(got) != 1 {
		t.Fatalf("events = %v, want only a1", got)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("wait returned after %s with a2 missing, before its deadline", waited)
	}

	rec.mu.Lock()
	first := rec.executions["e1"]
	rec.mu.Unlock()
	post("/execute", `{}`, "X-Approvals-Action", "e1") // a second delivery keeps the first time
	got = rec.wait(rec.executions, map[string]time.Time{"e1": time.Now()}, 5*time.Second)
	if len(got) != 1 || !got["e1"].Equal(first) {
		t.Fatalf("executions = %v, want e1 at its first arrival %v", got, first)
	}
}

// A delivery that arrives while wait waits wakes it at once.
func TestDeliveryReceiverWaitWakesOnArrival(t *testing.T) {
	t.Parallel()
	rec := newDeliveryReceiver()
	go func() {
		time.Sleep(50 * time.Millisecond)
		req := httptest.NewRequest(http.MethodPost, "/execute", bytes.NewReader(nil))
		req.Header.Set("X-Approvals-Action", "late")
		rec.ServeHTTP(httptest.NewRecorder(), req)
	}()
	start := time.Now()
	got := rec.wait(rec.executions, map[string]time.Time{"late": start}, 10*time.Second)
	if _, ok := got["late"]; !ok {
		t.Fatalf("executions = %v, want late", got)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("wait took %s, not woken by the arrival", waited)
	}
}

// paced starts call i at i/rate seconds, keeps the ids that succeeded with
// their start time, and returns the errors of the others.
func TestPacedSpacesCallsAndKeepsFailures(t *testing.T) {
	t.Parallel()
	start := time.Now()
	sent, errs := paced(context.Background(), 5, 100, func(i int) (string, error) {
		if i == 3 {
			return "", errors.New("refused")
		}
		return string(rune('a' + i)), nil
	})
	if len(sent) != 4 || len(errs) != 1 || errs[0].Error() != "refused" {
		t.Fatalf("sent %v, errs %v", sent, errs)
	}
	if at := sent["e"].Sub(start); at < 35*time.Millisecond {
		t.Fatalf("call 4 started %s after the first, want about 40ms at 100/s", at)
	}
	var out strings.Builder
	arrived := map[string]time.Time{"a": sent["a"].Add(3 * time.Millisecond), "b": sent["b"].Add(time.Millisecond)}
	printDelivery(&out, "deliver-test", "test", sent, arrived, errs)
	if !strings.Contains(out.String(), "summary scenario=deliver-test ops=2 ") || !strings.Contains(out.String(), "errors=3") {
		t.Fatalf("printDelivery wrote:\n%s\nwant 2 timed, 2 missing + 1 error", out.String())
	}
	if !strings.Contains(out.String(), "max_ms=3.00") {
		t.Fatalf("printDelivery wrote:\n%s\nwant max 3 ms", out.String())
	}
}
