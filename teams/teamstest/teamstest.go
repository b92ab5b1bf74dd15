// Package teamstest is a local Microsoft Teams Workflows webhook for tests: it answers 202 as
// Workflows does, and checks every posted message against the Adaptive Card 1.4 schema for
// the parts approvals uses (the message envelope, the card's required fields and version,
// each element's type, required and known properties and enumerations, Action.OpenUrl), so
// a card Teams would refuse fails the test.
package teamstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a Workflows webhook receiver. Its URL has a path like Workflows' (the path is the
// credential), so that tests can check it is never shown.
type Server struct {
	URL string // the webhook URL to configure

	mu      sync.Mutex
	cards   []map[string]any // the cards received, in order
	bad     []string
	fail    []int // statuses to answer next, one per request
	hold    bool  // keep requests open until the client goes away
	changed chan struct{}
}

// Path is the webhook's path, the credential a Workflows URL carries.
const Path = "/workflows/6f1c2b/triggers/manual/paths/invoke"

// New starts a receiver; it stops when the test ends, and every card that failed the schema
// check fails the test.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, b := range s.bad {
			t.Error("teamstest: " + b)
		}
	})
	s.URL = srv.URL + Path + "?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=c2VjcmV0"
	return s
}

// FailNext makes the next requests answer these statuses, one each.
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

// Cards returns the cards received so far (accepted or not).
func (s *Server) Cards() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cards)
}

// WaitFor waits until n cards arrived and returns them; it fails the test after timeout.
func (s *Server) WaitFor(t testing.TB, n int, timeout time.Duration) []map[string]any {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch, got := s.changed, len(s.cards)
		s.mu.Unlock()
		if got >= n {
			return s.Cards()
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("teamstest: %d cards after %s, want %d", got, timeout, n)
		}
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var card map[string]any
	problem := ""
	switch {
	case r.Method != http.MethodPost:
		problem = "method " + r.Method
	case r.URL.Path != Path || r.URL.Query().Get("sig") == "":
		problem = "posted to " + r.URL.Path + ", not the webhook's path"
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		problem = "Content-Type " + r.Header.Get("Content-Type")
	default:
		var err error
		if card, err = CheckMessage(body); err != nil {
			problem = err.Error() + "\n" + string(body)
		}
	}
	s.mu.Lock()
	if problem != "" {
		s.bad = append(s.bad, problem)
	}
	s.cards = append(s.cards, card)
	status, hold := http.StatusAccepted, s.hold
	if len(s.fail) > 0 {
		status, s.fail = s.fail[0], s.fail[1:]
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if hold {
		<-r.Context().Done()
		return
	}
	if problem != "" {
		// Workflows answers a card it cannot read with 400.
		http.Error(w, problem, http.StatusBadRequest)
		return
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
}

// CheckMessage checks a Workflows webhook body: {"type": "message", "attachments": [one
// Adaptive Card]}, and returns the card.
func CheckMessage(body []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("body is not JSON: %v", err)
	}
	if m["type"] != "message" {
		return nil, fmt.Errorf(`type %v, want "message"`, m["type"])
	}
	atts, _ := m["attachments"].([]any)
	if len(atts) != 1 {
		return nil, fmt.Errorf("%d attachments, want one card", len(atts))
	}
	att, _ := atts[0].(map[string]any)
	if att["contentType"] != "application/vnd.microsoft.card.adaptive" {
		return nil, fmt.Errorf("attachment contentType %v", att["contentType"])
	}
	if v, ok := att["contentUrl"]; ok && v != nil {
		return nil, fmt.Errorf("contentUrl %v, want null", v)
	}
	card, _ := att["content"].(map[string]any)
	if card == nil {
		return nil, fmt.Errorf("attachment without content")
	}
	return card, CheckCard(card)
}

// The properties of the Adaptive Card 1.4 schema that approvals' cards may use, by type,
// with the required ones first (the number after the type).
var known = map[string]struct {
	required int
	props    []string
}{
	"AdaptiveCard":   {2, []string{"type", "version", "$schema", "body", "actions", "fallbackText", "lang", "speak", "minHeight", "verticalContentAlignment", "msteams"}},
	"TextBlock":      {2, []string{"type", "text", "color", "fontType", "horizontalAlignment", "isSubtle", "maxLines", "size", "weight", "wrap", "style", "id", "spacing", "separator", "isVisible"}},
	"RichTextBlock":  {2, []string{"type", "inlines", "horizontalAlignment", "id", "spacing", "separator", "isVisible"}},
	"TextRun":        {2, []string{"type", "text", "color", "fontType", "highlight", "isSubtle", "italic", "size", "strikethrough", "underline", "weight", "selectAction"}},
	"FactSet":        {2, []string{"type", "facts", "id", "spacing", "separator", "isVisible"}},
	"Action.OpenUrl": {2, []string{"type", "url", "title", "iconUrl", "id", "style", "tooltip", "isEnabled"}},
}

var enums = map[string][]string{
	"color":               {"default", "dark", "light", "accent", "good", "warning", "attention"},
	"size":                {"default", "small", "medium", "large", "extralarge"},
	"weight":              {"default", "lighter", "bolder"},
	"spacing":             {"default", "none", "small", "medium", "large", "extralarge", "padding"},
	"horizontalAlignment": {"left", "center", "right"},
}

// CheckCard checks an Adaptive Card of version 1.4 as the schema says for the elements
// above, and refuses any other element type: Teams shows nothing of a card it cannot read.
func CheckCard(card map[string]any) error {
	if card["type"] != "AdaptiveCard" || card["version"] != "1.4" {
		return fmt.Errorf("card type %v version %v, want AdaptiveCard 1.4", card["type"], card["version"])
	}
	if card["$schema"] != "http://adaptivecards.io/schemas/adaptive-card.json" {
		return fmt.Errorf("card $schema %v", card["$schema"])
	}
	if err := checkObject("card", card); err != nil {
		return err
	}
	body, ok := card["body"].([]any)
	if !ok || len(body) == 0 {
		return fmt.Errorf("card body is not a non-empty array")
	}
	for i, e := range body {
		if err := checkElement(fmt.Sprintf("body[%d]", i), e); err != nil {
			return err
		}
	}
	actions, _ := card["actions"].([]any)
	if len(actions) == 0 {
		return fmt.Errorf("card has no actions")
	}
	for i, a := range actions {
		m, _ := a.(map[string]any)
		if err := checkObject(fmt.Sprintf("actions[%d]", i), m); err != nil {
			return err
		}
		if m["type"] != "Action.OpenUrl" {
			return fmt.Errorf("actions[%d] is %v: a Workflows webhook card can only open links", i, m["type"])
		}
		u, err := url.Parse(fmt.Sprint(m["url"]))
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("actions[%d].url %v is not an absolute URL", i, m["url"])
		}
	}
	return nil
}

func checkElement(where string, e any) error {
	m, ok := e.(map[string]any)
	if !ok {
		return fmt.Errorf("%s is not an object", where)
	}
	if err := checkObject(where, m); err != nil {
		return err
	}
	switch m["type"] {
	case "TextBlock":
		if s, ok := m["text"].(string); !ok || s == "" {
			return fmt.Errorf("%s: TextBlock needs text", where)
		}
	case "RichTextBlock":
		inl, ok := m["inlines"].([]any)
		if !ok || len(inl) == 0 {
			return fmt.Errorf("%s: RichTextBlock needs inlines", where)
		}
		for i, r := range inl {
			rm, _ := r.(map[string]any)
			if err := checkObject(fmt.Sprintf("%s.inlines[%d]", where, i), rm); err != nil {
				return err
			}
			if rm["type"] != "TextRun" {
				return fmt.Errorf("%s.inlines[%d] is %v, want TextRun", where, i, rm["type"])
			}
			if _, ok := rm["text"].(string); !ok {
				return fmt.Errorf("%s.inlines[%d]: TextRun needs text", where, i)
			}
		}
	case "FactSet":
		facts, _ := m["facts"].([]any)
		for i, f := range facts {
			fm, _ := f.(map[string]any)
			if _, ok := fm["title"].(string); !ok || len(fm) != 2 {
				return fmt.Errorf("%s.facts[%d]: a fact is {title, value}", where, i)
			}
			if _, ok := fm["value"].(string); !ok {
				return fmt.Errorf("%s.facts[%d]: a fact is {title, value}", where, i)
			}
		}
	}
	return nil
}

// checkObject checks an object's type is known, it has the required properties and no
// unknown ones, and its enumerations hold a value of theirs.
func checkObject(where string, m map[string]any) error {
	typ, _ := m["type"].(string)
	k, ok := known[typ]
	if !ok {
		return fmt.Errorf("%s has type %q, which approvals' cards do not use", where, typ)
	}
	for _, p := range k.props[:k.required] {
		if _, ok := m[p]; !ok {
			return fmt.Errorf("%s (%s) lacks the required %q", where, typ, p)
		}
	}
	for p, v := range m {
		if !slices.Contains(k.props, p) {
			return fmt.Errorf("%s (%s) has %q, which the schema does not define", where, typ, p)
		}
		if allowed, ok := enums[p]; ok {
			s, _ := v.(string)
			if !slices.Contains(allowed, strings.ToLower(s)) {
				return fmt.Errorf("%s (%s): %s %v is not one of %v", where, typ, p, v, allowed)
			}
		}
	}
	return nil
}

// Texts is every text of a card, joined by newlines, to search in.
func Texts(card map[string]any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["text"].(string); ok {
				b.WriteString(s + "\n")
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(card)
	return b.String()
}
