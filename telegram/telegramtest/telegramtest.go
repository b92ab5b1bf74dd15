// Package telegramtest is a local Telegram Bot API for tests: it checks the bot token in
// every method's path, answers sendMessage (with a new message id), editMessageText
// ("message is not modified" when nothing changes, as Telegram does), answerCallbackQuery and
// setWebhook as Telegram does, records every call, and builds the updates Telegram posts to a
// webhook.
package telegramtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
)

// Call is one Bot API request received.
type Call struct {
	Method string
	Params map[string]any
	// MessageID is the id sendMessage answered with (0 for other methods).
	MessageID int64
	// Refused is why Telegram refused the call ("" when it answered ok).
	Refused string
}

// Text is the call's text parameter.
func (c Call) Text() string { s, _ := c.Params["text"].(string); return s }

// Buttons lists the inline keyboard's buttons as "text=callback_data" or "text→url".
func (c Call) Buttons() []string {
	var out []string
	rm, _ := c.Params["reply_markup"].(map[string]any)
	rows, _ := rm["inline_keyboard"].([]any)
	for _, r := range rows {
		row, _ := r.([]any)
		for _, b := range row {
			m, _ := b.(map[string]any)
			if d, ok := m["callback_data"].(string); ok {
				out = append(out, fmt.Sprint(m["text"])+"="+d)
			} else {
				out = append(out, fmt.Sprint(m["text"])+"→"+fmt.Sprint(m["url"]))
			}
		}
	}
	return out
}

// Failure makes a call fail as the Bot API does.
type Failure struct {
	Code        int    // error_code and HTTP status, e.g. 429 or 400
	Description string // e.g. "Too Many Requests: retry after 1"
	RetryAfter  int    // parameters.retry_after of a 429
}

// Server is the Bot API of one bot.
type Server struct {
	URL   string // the value of APPROVALS_TELEGRAM_API_URL
	Token string
	BotID int64

	mu      sync.Mutex
	calls   []Call
	nextID  int64
	texts   map[string]string // chat/message id → its text now
	fail    map[string][]Failure
	hold    bool
	changed chan struct{}
}

// New starts a Bot API for token (BOTID:SECRET); it stops when the test ends.
func New(t testing.TB, token string) *Server {
	t.Helper()
	id, err := strconv.ParseInt(token[:strings.IndexByte(token, ':')], 10, 64)
	if err != nil {
		t.Fatalf("telegramtest: token %q has no bot id", token)
	}
	s := &Server{Token: token, BotID: id, nextID: 100, texts: map[string]string{}, fail: map[string][]Failure{}, changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// FailNext makes the next calls of method fail, one failure per call.
func (s *Server) FailNext(method string, f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = append(s.fail[method], f...)
}

// Hold keeps every request open until its client goes away (a sender killed mid-send).
func (s *Server) Hold(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = on
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

// WaitFor waits until method was called n times and returns those calls; it fails the test
// after timeout.
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
			t.Fatalf("telegramtest: %d %s calls after %s, want %d", len(s.Calls(method)), method, timeout, n)
		}
	}
}

var methodPath = regexp.MustCompile(`^/bot([^/]+)/([A-Za-z]+)$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	m := methodPath.FindStringSubmatch(r.URL.Path)
	w.Header().Set("Content-Type", "application/json")
	if m == nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"ok":false,"error_code":404,"description":"Not Found"}`)
		return
	}
	if m[1] != s.Token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"ok":false,"error_code":401,"description":"Unauthorized"}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	c := Call{Method: m[2]}
	if err := json.Unmarshal(body, &c.Params); err != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"ok":false,"error_code":400,"description":"Bad Request: body is not JSON"}`)
		return
	}
	s.mu.Lock()
	var fl *Failure
	if q := s.fail[c.Method]; len(q) > 0 {
		fl, s.fail[c.Method] = &q[0], q[1:]
	}
	hold := s.hold
	result, bad := any(true), ""
	if fl == nil && !hold {
		result, bad = s.answer(&c)
	}
	if c.Refused = bad; fl != nil {
		c.Refused = fl.Description
	}
	s.calls = append(s.calls, c)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	switch {
	case hold:
		<-r.Context().Done()
	case fl != nil:
		w.WriteHeader(fl.Code)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": fl.Code, "description": fl.Description,
			"parameters": map[string]any{"retry_after": fl.RetryAfter}})
	case bad != "":
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: " + bad})
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
	}
}

// answer is the result of a call, or why Telegram refuses it; s.mu is held.
func (s *Server) answer(c *Call) (any, string) {
	chat := fmt.Sprint(c.Params["chat_id"])
	switch c.Method {
	case "sendMessage":
		if c.Text() == "" || chat == "" || chat == "<nil>" {
			return nil, "message text is empty"
		}
		if pm, ok := c.Params["parse_mode"]; ok && pm != "HTML" {
			return nil, "unsupported parse_mode"
		}
		s.nextID++
		c.MessageID = s.nextID
		s.texts[chat+"/"+strconv.FormatInt(c.MessageID, 10)] = c.Text()
		return map[string]any{"message_id": c.MessageID, "date": time.Now().Unix(), "chat": map[string]any{"id": chat},
			"from": map[string]any{"id": s.BotID, "is_bot": true}, "text": c.Text()}, ""
	case "editMessageText":
		key := chat + "/" + fmt.Sprint(c.Params["message_id"])
		old, ok := s.texts[key]
		switch {
		case !ok:
			return nil, "message to edit not found"
		case old == c.Text() && c.Params["reply_markup"] == nil:
			return nil, "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"
		}
		s.texts[key] = c.Text()
		return map[string]any{"message_id": c.Params["message_id"], "chat": map[string]any{"id": chat}, "text": c.Text()}, ""
	case "answerCallbackQuery":
		if c.Params["callback_query_id"] == nil {
			return nil, "query id is empty"
		}
		if len(utf16.Encode([]rune(c.Text()))) > 200 { // the Bot API's limit: 0-200 characters
			return nil, "MESSAGE_TOO_LONG"
		}
		return true, ""
	case "setWebhook":
		u, _ := c.Params["url"].(string)
		if u == "" {
			return nil, "bad webhook: an HTTPS URL must be provided for webhook"
		}
		return true, ""
	}
	return nil, "method not found"
}

// Text is the text Telegram shows a message with now (after its edits).
func (s *Server) Text(chat string, messageID int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.texts[chat+"/"+strconv.FormatInt(messageID, 10)]
}

// plain is a message's text as Telegram hands it back in reply_to_message: without its
// HTML.
var tags = regexp.MustCompile(`<[^>]*>`)

func plain(html string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'", "&#34;", `"`, "&amp;", "&").Replace(tags.ReplaceAllString(html, ""))
}

// Press is the update of user pressing the button with data on message of chat.
func Press(updateID, user int64, chat string, message int64, data string) []byte {
	chatID, _ := strconv.ParseInt(chat, 10, 64)
	b, _ := json.Marshal(map[string]any{"update_id": updateID, "callback_query": map[string]any{
		"id": "cq-" + strconv.FormatInt(updateID, 10), "from": map[string]any{"id": user, "is_bot": false, "first_name": "User" + strconv.FormatInt(user, 10)},
		"chat_instance": "1", "data": data,
		"message": map[string]any{"message_id": message, "chat": map[string]any{"id": chatID, "type": "supergroup"}, "date": 1},
	}})
	return b
}

// Reply is the update of user replying text, in chat, to the bot's message prompt (a
// sendMessage call of this server).
func (s *Server) Reply(updateID, user int64, chat string, prompt Call, text string) []byte {
	chatID, _ := strconv.ParseInt(chat, 10, 64)
	b, _ := json.Marshal(map[string]any{"update_id": updateID, "message": map[string]any{
		"message_id": 9000 + updateID, "from": map[string]any{"id": user, "is_bot": false, "first_name": "User"},
		"chat": map[string]any{"id": chatID, "type": "supergroup"}, "date": 2, "text": text,
		"reply_to_message": map[string]any{"message_id": prompt.MessageID, "from": map[string]any{"id": s.BotID, "is_bot": true, "first_name": "approvals"},
			"chat": map[string]any{"id": chatID, "type": "supergroup"}, "date": 1, "text": plain(prompt.Text())},
	}})
	return b
}

// Post sends update to a webhook as Telegram does, with secret in the secret header.
func Post(t testing.TB, webhook, secret string, update []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, webhook, bytes.NewReader(update))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}
