package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
)

// rawPoll sends GET path with token over a connection of its own and
// returns it with its reader, so that a test sees the connection itself:
// what the answer says about it and when it closes.
func rawPoll(t *testing.T, base, token, path string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: approvals\r\nAuthorization: Bearer %s\r\n\r\n", path, token); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// TestDetachedLongPollAnswer: a long-poll that waited on its hijacked
// connection answers as the handler would have (status, the security
// headers the middleware set, the same body byte for byte as a read
// without wait), says Connection: close, and closes the connection.
func TestDetachedLongPollAnswer(t *testing.T) {
	t.Parallel()
	for name, onSQLite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := apptest.StartAPI(t, apptest.Options{SQLite: onSQLite})
			a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-detached", "t")).Action(t)
			conn, rd := rawPoll(t, e.URL, e.AgentToken, "/api/v1/actions/"+a.ID+"?wait=50s")
			e.App.AwaitWaiters(t, 1)
			if _, err := e.Service.Decide(context.Background(), queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"}); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			res, err := http.ReadResponse(rd, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != http.StatusOK || !res.Close || res.Header.Get("Content-Type") != "application/json" ||
				res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Content-Security-Policy") == "" ||
				res.Header.Get("Date") == "" || res.ContentLength != int64(len(body)) {
				t.Fatalf("answer: %d close=%v length=%d %v", res.StatusCode, res.Close, res.ContentLength, res.Header)
			}
			plain := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID, nil)
			if !bytes.Equal(body, plain.Body) {
				t.Fatalf("long-poll body\n%s\nwant the read's\n%s", body, plain.Body)
			}
			if n, err := rd.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("after the answer: read %d, %v; want the connection closed", n, err)
			}
			awaitWaitersDrop(t, e.Polls, 0)
		})
	}
}

// TestLongPollClientLeaves: a client that closes its connection while its
// long-poll waits gives back its waiter slot at once, not at the wait's
// end: with one slot per token, the same token may poll again.
func TestLongPollClientLeaves(t *testing.T) {
	t.Parallel()
	for name, onSQLite := range map[string]bool{"postgres": false, "sqlite": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := apptest.StartAPI(t, apptest.Options{SQLite: onSQLite, Waiters: longpoll.WaiterLimits{Total: 1, PerHolder: 1}})
			a := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", apptest.EmailBody("c-leaves", "t")).Action(t)
			path := "/api/v1/actions/" + a.ID
			conn, _ := rawPoll(t, e.URL, e.AgentToken, path+"?wait=50s")
			e.App.AwaitWaiters(t, 1)
			if r := e.Do(e.URL, e.AgentToken, "GET", path+"?wait=1s", nil); r.Status != http.StatusTooManyRequests {
				t.Fatalf("second poll while the first waits: %d %s, want 429", r.Status, r.Body)
			}
			conn.Close()
			awaitWaitersDrop(t, e.Polls, 0)
			start := time.Now()
			r := e.Do(e.URL, e.AgentToken, "GET", path+"?wait=1s", nil)
			if r.Status != http.StatusOK || r.Action(t).State != queue.StatePending {
				t.Fatalf("poll after the first left: %d %s", r.Status, r.Body)
			}
			if waited := time.Since(start); waited < 900*time.Millisecond {
				t.Fatalf("the poll after answered in %v, before its wait of 1s", waited)
			}
		})
	}
}

func awaitWaitersDrop(t *testing.T, polls *longpoll.Polls, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for polls.Waiters() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d long-polls still waiting after 20s, want %d", polls.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReadmeWaitAnswersOnceDecided (issue 44, point 7): the README's walk
// waits with &state=pending, so a reader who approves first is answered at
// once, not after 30 s.
func TestReadmeWaitAnswersOnceDecided(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{})
	a := apptest.Submit(t, e.Service, "send_customer_email", apptest.EmailBody("c-42", "welcome")["payload"].(map[string]any))
	apptest.Approve(t, e.Service, a.ID)
	start := time.Now()
	r := e.Do(e.URL, e.AgentToken, "GET", "/api/v1/actions/"+a.ID+"?wait=30s&state=pending", nil)
	if r.Status != http.StatusOK || r.Action(t).State != queue.StateApproved {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("an approved action's wait took %v", took)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "?wait=30s&state=pending") {
		t.Error("the README's walk waits without &state=pending")
	}
}
