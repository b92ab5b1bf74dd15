package web_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestBodyReadTimeout: a client that stops sending its body is answered
// (4xx, never 5xx) once the body-read timeout passes, while a long-poll,
// which has no body, outlives that timeout untouched.
func TestBodyReadTimeout(t *testing.T) {
	t.Parallel()
	for name, onSQLite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := apptest.StartAPI(t, apptest.Options{SQLite: onSQLite, BodyReadTimeout: 200 * time.Millisecond})
			token := e.AgentToken

			conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The client's own deadline only keeps a broken server from
			// hanging the test; the server must answer long before it.
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(conn, "POST /api/v1/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"tool\":", token)
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body: %v", err)
			}
			res.Body.Close()
			if res.StatusCode < 400 || res.StatusCode >= 500 {
				t.Fatalf("stalled body: %d, want a 4xx", res.StatusCode)
			}

			a := e.Do(e.URL, token, "POST", "/api/v1/actions", apptest.EmailBody("c-slow", "t")).Action(t)
			start := time.Now()
			r := e.Do(e.URL, token, "GET", "/api/v1/actions/"+a.ID+"?wait=1s", nil)
			if r.Status != http.StatusOK || r.Action(t).State != queue.StatePending || time.Since(start) < time.Second {
				t.Fatalf("long-poll past the body timeout: %d %s after %s", r.Status, r.Body, time.Since(start))
			}
			if !strings.Contains(string(r.Body), a.ID) {
				t.Fatalf("long-poll answered %s", r.Body)
			}
		})
	}
}
