package slack_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/approvals/approvals/queue"
)

const botToken = "xoxb-1-test-token"

// fakeSlack speaks the part of Slack's Web API the channel uses, as Slack does: every method
// answers HTTP 200 with {"ok": …}, a missing or wrong bot token is {"ok": false, "error":
// "not_authed"}, and a method can be told to fail once with ok:false or HTTP 429. It records
// every call, including those to the response_url it hands out under /respond/.
type fakeSlack struct {
	srv *httptest.Server

	mu    sync.Mutex
	calls []call
	ts    int
	fail  map[string]failure // by method, used once
}

type call struct {
	Method string
	Auth   string            // the Authorization header
	Form   url.Values        // form-encoded methods
	JSON   map[string]any    // JSON methods and response_url posts
	Blocks []map[string]any  // the form's blocks, decoded
	Header map[string]string // a few request headers
}

type failure struct {
	status     int    // 0 means 200
	retryAfter string // Retry-After of a 429
	body       string
}

func newFakeSlack(t *testing.T) *fakeSlack {
	t.Helper()
	f := &fakeSlack{fail: map[string]failure{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) apiURL() string { return f.srv.URL + "/api/" }

func (f *fakeSlack) failNext(method string, fl failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = fl
}

func (f *fakeSlack) recorded(method string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := call{Auth: r.Header.Get("Authorization"), Header: map[string]string{"Content-Type": r.Header.Get("Content-Type")}}
	switch ct := r.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/x-www-form-urlencoded"):
		c.Form, _ = url.ParseQuery(string(body))
		if b := c.Form.Get("blocks"); b != "" {
			_ = json.Unmarshal([]byte(b), &c.Blocks)
		}
	case strings.HasPrefix(ct, "application/json"):
		_ = json.Unmarshal(body, &c.JSON)
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/respond/"); ok {
		c.Method = "response_url:" + rest
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
		return
	}
	c.Method = strings.TrimPrefix(r.URL.Path, "/api/")
	f.mu.Lock()
	f.calls = append(f.calls, c)
	fl, failing := f.fail[c.Method]
	delete(f.fail, c.Method)
	f.ts++
	ts := "1700000000.0001" + strconv.Itoa(10+f.ts)
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	// Slack takes the token from the header, or from the form as slack-go also sends it;
	// both, when present, must be the bot token.
	if c.Auth != "Bearer "+botToken || (c.Form != nil && c.Form.Has("token") && c.Form.Get("token") != botToken) {
		_, _ = io.WriteString(w, `{"ok":false,"error":"not_authed"}`)
		return
	}
	if failing {
		if fl.retryAfter != "" {
			w.Header().Set("Retry-After", fl.retryAfter)
		}
		if fl.status != 0 {
			w.WriteHeader(fl.status)
		}
		_, _ = io.WriteString(w, fl.body)
		return
	}
	switch c.Method {
	case "chat.postMessage":
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.Form.Get("channel"), "ts": ts})
	case "chat.update":
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.Form.Get("channel"), "ts": c.Form.Get("ts"), "text": c.Form.Get("text")})
	case "views.open":
		_, _ = io.WriteString(w, `{"ok":true,"view":{"id":"V123","type":"modal"}}`)
	default:
		_, _ = io.WriteString(w, `{"ok":false,"error":"unknown_method"}`)
	}
}

// buttons lists the action_id=value of every button in blocks.
func buttons(blocks []map[string]any) []string {
	var out []string
	for _, b := range blocks {
		if b["type"] != "actions" {
			continue
		}
		els, _ := b["elements"].([]any)
		for _, e := range els {
			m, _ := e.(map[string]any)
			out = append(out, m["action_id"].(string)+"="+m["value"].(string))
		}
	}
	return out
}

// blockText is every text of blocks joined, to search in.
func blockText(blocks []map[string]any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "text" {
					b.WriteString(s + "\n")
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, blk := range blocks {
		walk(blk)
	}
	return b.String()
}

// messageLog keeps the posted messages as the stores do, in memory: the stores' own
// behaviour is tested by their conformance suite, not here.
type messageLog struct {
	mu   sync.Mutex
	list []queue.SlackMessage
}

func (l *messageLog) SlackMessageAdd(_ context.Context, m queue.SlackMessage) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, m)
	return nil
}

func (l *messageLog) SlackMessageList(_ context.Context, actionID string) ([]queue.SlackMessage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []queue.SlackMessage
	for _, m := range l.list {
		if m.ActionID == actionID {
			out = append(out, m)
		}
	}
	return out, nil
}

func (l *messageLog) all() []queue.SlackMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]queue.SlackMessage(nil), l.list...)
}
