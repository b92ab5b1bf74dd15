// Package slacktest is a local Slack for tests outside package slack: a Web API server that
// checks the bot token and records every call (chat.postMessage, chat.update, views.open and
// posts to the response_url it hands out), and signed interaction requests as Slack sends
// them. The end-to-end tests of the server and the dashboard's interactions endpoint share it.
package slacktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Call is one request the server received.
type Call struct {
	Method string     // chat.postMessage, chat.update, views.open, or "response_url"
	Path   string     // the request's path, e.g. /respond/1
	Auth   string     // the Authorization header
	Form   url.Values // form-encoded methods
	JSON   map[string]any
}

// Blocks is the form's blocks (chat.postMessage, chat.update) decoded; nil when there are none.
func (c Call) Blocks() []map[string]any {
	var blocks []map[string]any
	if b := c.Form.Get("blocks"); b != "" {
		_ = json.Unmarshal([]byte(b), &blocks)
	}
	return blocks
}

// Failure makes the next call of a method fail.
type Failure struct {
	Status     int    // 0 means 200
	RetryAfter string // Retry-After of a 429
	Body       string // e.g. {"ok":false,"error":"channel_not_found"}
}

// Server speaks the part of Slack's Web API approvals uses, as Slack does: every method
// answers HTTP 200 with {"ok": …}, and a missing or wrong bot token is {"ok": false,
// "error": "not_authed"}.
type Server struct {
	URL   string // the server's base URL; the API is under /api/
	token string

	mu      sync.Mutex
	calls   []Call
	ts      int
	fail    map[string][]Failure
	changed chan struct{} // closed and replaced on every call, to wait without sleeping
}

// New starts a server that accepts token; it stops when the test ends.
func New(t testing.TB, token string) *Server {
	t.Helper()
	s := &Server{token: token, fail: map[string][]Failure{}, changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// APIURL is the value for APPROVALS_SLACK_API_URL.
func (s *Server) APIURL() string { return s.URL + "/api/" }

// ResponseURL is a response_url for an interaction; its posts are recorded as "response_url".
func (s *Server) ResponseURL() string { return s.URL + "/respond/1" }

// FailNext makes the next calls of method fail, one failure per call, in order.
func (s *Server) FailNext(method string, f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = append(s.fail[method], f...)
}

// Calls returns the calls of method so far.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// WaitFor waits until method has been called at least n times and returns those calls; it
// fails the test after timeout. It wakes on every call, so it does not poll.
func (s *Server) WaitFor(t testing.TB, method string, n int, timeout time.Duration) []Call {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if c := s.Calls(method); len(c) >= n {
			return c
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("slacktest: %d %s calls after %s, want %d", len(s.Calls(method)), method, timeout, n)
		}
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := Call{Path: r.URL.Path, Auth: r.Header.Get("Authorization")}
	switch ct := r.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/x-www-form-urlencoded"):
		c.Form, _ = url.ParseQuery(string(body))
	case strings.HasPrefix(ct, "application/json"):
		_ = json.Unmarshal(body, &c.JSON)
	}
	respond := strings.HasPrefix(r.URL.Path, "/respond/")
	if respond {
		c.Method = "response_url"
	} else {
		c.Method = strings.TrimPrefix(r.URL.Path, "/api/")
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	var fl *Failure
	if q := s.fail[c.Method]; len(q) > 0 {
		fl, s.fail[c.Method] = &q[0], q[1:]
	}
	s.ts++
	ts := "1700000000." + strconv.Itoa(100000+s.ts)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()

	if respond {
		_, _ = io.WriteString(w, "ok")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// Slack takes the token from the header or from the form (slack-go sends both for some
	// methods); both, when present, must be the bot token.
	if c.Auth != "Bearer "+s.token || (c.Form != nil && c.Form.Has("token") && c.Form.Get("token") != s.token) {
		_, _ = io.WriteString(w, `{"ok":false,"error":"not_authed"}`)
		return
	}
	if fl != nil {
		if fl.RetryAfter != "" {
			w.Header().Set("Retry-After", fl.RetryAfter)
		}
		if fl.Status != 0 {
			w.WriteHeader(fl.Status)
		}
		_, _ = io.WriteString(w, fl.Body)
		return
	}
	if (c.Method == "chat.postMessage" || c.Method == "chat.update") && !blocksFit(c.Blocks()) {
		_, _ = io.WriteString(w, `{"ok":false,"error":"invalid_blocks"}`)
		return
	}
	switch c.Method {
	case "chat.postMessage":
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.Form.Get("channel"), "ts": ts})
	case "chat.update":
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.Form.Get("channel"), "ts": c.Form.Get("ts")})
	case "views.open":
		_, _ = io.WriteString(w, `{"ok":true,"view":{"id":"V123","type":"modal"}}`)
	default:
		_, _ = io.WriteString(w, `{"ok":false,"error":"unknown_method"}`)
	}
}

// blocksFit reports whether blocks keep Slack's limits on a section's text: at most 3000
// characters, and at most 2000 in each of its fields (Slack refuses the message with
// invalid_blocks otherwise).
func blocksFit(blocks []map[string]any) bool {
	length := func(o any) int {
		m, _ := o.(map[string]any)
		t, _ := m["text"].(string)
		return utf8.RuneCountInString(t)
	}
	for _, b := range blocks {
		if b["type"] != "section" {
			continue
		}
		if length(b["text"]) > 3000 {
			return false
		}
		fields, _ := b["fields"].([]any)
		for _, f := range fields {
			if length(f) > 2000 {
				return false
			}
		}
	}
	return true
}

// Sign returns the headers Slack sends with body at ts, signed under secret.
func Sign(secret string, ts time.Time, body []byte) http.Header {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + stamp + ":"))
	mac.Write(body)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", stamp)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

// TeamID and AppID are the workspace and app every interaction of this package comes from.
const (
	TeamID = "T1"
	AppID  = "A1"
)

// ButtonPress is the form body of a block_actions interaction: user pressed button
// (approve, reject, request_changes) on the message of actionID.
func ButtonPress(user, button, actionID, responseURL string) []byte {
	return form(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user}, "team": map[string]any{"id": TeamID}, "api_app_id": AppID,
		"trigger_id": "trigger-" + button, "response_url": responseURL,
		"actions": []any{map[string]any{"type": "button", "block_id": "decision", "action_id": button, "value": actionID}},
	})
}

// NoteSubmission is the form body of a view_submission of the note modal of kind (reject,
// request_changes) for actionID.
func NoteSubmission(user, kind, actionID, note string) []byte {
	return form(map[string]any{
		"type": "view_submission", "user": map[string]any{"id": user}, "team": map[string]any{"id": TeamID}, "api_app_id": AppID,
		"view": map[string]any{
			"type": "modal", "callback_id": kind, "private_metadata": actionID,
			"state": map[string]any{"values": map[string]any{"note": map[string]any{"note": map[string]any{"type": "plain_text_input", "value": note}}}},
		},
	})
}

func form(payload map[string]any) []byte {
	b, _ := json.Marshal(payload)
	return []byte("payload=" + url.QueryEscape(string(b)))
}
