package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
)

// API is one process (Start) with an agent token and an HTTP client that
// checks every answer of the agent REST API against the OpenAPI document
// it serves.
type API struct {
	*App
	*testclock.Clock
	T testing.TB
	// AgentToken is the token of agent "bot".
	AgentToken string
	Client     *http.Client
}

// StartAPI starts a process with opts and creates the agent token "bot".
func StartAPI(t testing.TB, opts Options) *API {
	t.Helper()
	a := Start(t, opts)
	e := &API{App: a, Clock: a.Clock, T: t,
		Client: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}}}
	e.AgentToken = a.Token(t, "bot")
	return e
}

// EmailBody is a submission of tools.example.yaml's send_customer_email
// to customer about topic.
func EmailBody(customer, topic string) map[string]any {
	return map[string]any{"tool": "send_customer_email", "payload": map[string]any{
		"customer_id": customer, "topic": topic, "to": "c@example.com", "subject": "Hello", "body": "Hi there"}}
}

// RefundBody is a submission of tools.example.yaml's issue_refund of
// amount on line 1 of order.
func RefundBody(order string, amount float64) map[string]any {
	return map[string]any{"tool": "issue_refund", "payload": map[string]any{"order_id": order, "line_id": 1, "amount": amount, "currency": "EUR"}}
}

// APIStores starts one API server per store, for the rules that must hold
// on both.
var APIStores = []struct {
	Name  string
	Start func(testing.TB) *API
}{
	{"postgres", func(t testing.TB) *API { return StartAPI(t, Options{}) }},
	{"sqlite", func(t testing.TB) *API { return StartAPI(t, Options{SQLite: true}) }},
}

// AddServerURL starts another server process (its own pool and LISTEN
// connection) on the same PostgreSQL database and returns its base URL.
func (e *API) AddServerURL() string {
	return e.App.AddServer(e.T, nil).URL
}

// Resp is one answer of the API.
type Resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// Action decodes the answer as an action.
func (r Resp) Action(t testing.TB) queue.Action {
	t.Helper()
	var a queue.Action
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("decode action from %s: %v", r.Body, err)
	}
	return a
}

// Problem decodes the answer as problem details.
func (r Resp) Problem(t testing.TB) problem.Details {
	t.Helper()
	var p problem.Details
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("decode problem from %s: %v", r.Body, err)
	}
	return p
}

// Do sends a request as the agent holding token ("" for none) to the
// server at base, with hdr as name, value pairs, and validates the
// response against the served OpenAPI document; a failure ends the test.
func (e *API) Do(base, token, method, path string, body any, hdr ...string) Resp {
	e.T.Helper()
	r, err := e.Try(base, token, method, path, body, hdr...)
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

// Try is Do that returns what went wrong, for goroutines other than the
// test's.
func (e *API) Try(base, token, method, path string, body any, hdr ...string) (Resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return Resp{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.Client.Do(req)
	if err != nil {
		return Resp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return Resp{}, err
	}
	out := Resp{Status: res.StatusCode, Header: res.Header, Body: b}
	if err := validateResponse(method, path, out); err != nil {
		return out, fmt.Errorf("%s %s → %d %s: %w", method, path, out.Status, out.Body, err)
	}
	return out, nil
}

var (
	openapiOnce sync.Once
	openapiDoc  map[string]any
	schemaMu    sync.Mutex
	schemas     = map[string]*jsonschema.Schema{}
	compiler    *jsonschema.Compiler
)

// validateResponse checks a response against handlers.OpenAPIDocument: the
// status must be documented for the operation and the body must match the
// schema of its content type.
func validateResponse(method, path string, r Resp) error {
	openapiOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(handlers.OpenAPIDocument))
		if err != nil {
			panic(err)
		}
		openapiDoc = doc.(map[string]any)
		compiler = jsonschema.NewCompiler()
		if err := compiler.AddResource("openapi.json", doc); err != nil {
			panic(err)
		}
	})
	tmpl := pathTemplate(path)
	paths := openapiDoc["paths"].(map[string]any)
	item, ok := paths[tmpl].(map[string]any)
	if !ok {
		return fmt.Errorf("path %s is not in the OpenAPI document", tmpl)
	}
	op, ok := item[strings.ToLower(method)].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s is not in the OpenAPI document", method, tmpl)
	}
	status := fmt.Sprint(r.Status)
	rs, ok := op["responses"].(map[string]any)[status].(map[string]any)
	if !ok {
		return fmt.Errorf("status %s of %s %s is not documented", status, method, tmpl)
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	content, _ := rs["content"].(map[string]any)
	if _, ok := content[ct]; !ok {
		return fmt.Errorf("content type %q of %s %s %s is not documented", ct, method, tmpl, status)
	}
	ptr := "openapi.json#/paths/" + escapePointer(tmpl) + "/" + strings.ToLower(method) + "/responses/" + status + "/content/" + escapePointer(ct) + "/schema"
	schemaMu.Lock()
	sch, ok := schemas[ptr]
	if !ok {
		var err error
		sch, err = compiler.Compile(ptr)
		if err != nil {
			schemaMu.Unlock()
			return fmt.Errorf("compile %s: %w", ptr, err)
		}
		schemas[ptr] = sch
	}
	schemaMu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Body))
	if err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	return sch.Validate(v)
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// pathTemplate maps a concrete path to its OpenAPI template.
func pathTemplate(path string) string {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(path, "/")
	// /api/v1/actions/{id}[/verb]
	if len(parts) >= 5 && (parts[3] == "actions" || parts[3] == "plans") {
		parts[4] = "{id}"
	}
	return strings.Join(parts, "/")
}

// RunConcurrently releases n goroutines at once and collects their results.
func RunConcurrently[T any](n int, fn func(i int) T) []T {
	start := make(chan struct{})
	out := make([]T, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// Dashboard is one process (Start) whose staff sign in with Password.
type Dashboard struct {
	*App
	*testclock.Clock
	T testing.TB
	// sweepMu serialises staleTicket's sweeps: a sweep skips the claims
	// another sweep has locked (FOR UPDATE SKIP LOCKED), so a parallel
	// subtest's sweep could be opening this subtest's ticket, uncommitted,
	// when this one lists it.
	sweepMu sync.Mutex
}

// Password is every staff user's password.
const Password = "correct horse battery staple"

// PasswordHash is Password hashed once: bcrypt is slow on purpose, and
// every test user shares the password.
var PasswordHash = sync.OnceValue(func() string {
	h, err := accounts.HashPassword(Password)
	if err != nil {
		panic(err)
	}
	return h
})

// StartDashboard starts a process with opts.
func StartDashboard(t testing.TB, opts Options) *Dashboard {
	t.Helper()
	a := Start(t, opts)
	return &Dashboard{App: a, Clock: a.Clock, T: t}
}

// AddUser creates a staff user with Password.
func (d *Dashboard) AddUser(email string, role accounts.Role) *accounts.User {
	d.T.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	u, err := d.Store.UserCreate(context.Background(), &accounts.User{Email: email, PasswordHash: PasswordHash(),
		Role: role, CreatedAt: now, PasswordChangedAt: now})
	if err != nil {
		d.T.Fatal(err)
	}
	return u
}

// SubmitEmail submits a send_customer_email action as agent bot.
func (d *Dashboard) SubmitEmail(customer, subject, body string) *queue.Action {
	d.T.Helper()
	return d.Submit("send_customer_email", `{"customer_id":"`+customer+`","topic":"t","to":"c@example.com","subject":`+
		JSONString(subject)+`,"body":`+JSONString(body)+`}`, "")
}

// Submit submits payload (JSON) to tool as agent bot, with key.
func (d *Dashboard) Submit(tool, payload, key string) *queue.Action {
	d.T.Helper()
	res, err := d.Service.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: []byte(payload), IntentKey: key, Agent: "bot"})
	if err != nil {
		d.T.Fatalf("submit %s: %v", tool, err)
	}
	return res.Action
}

// StaleTicket makes an exactly-once claim outlive its claim timeout and
// returns the ticket the sweep opens for it.
func (d *Dashboard) StaleTicket(order string) (*queue.Action, *queue.Ticket) {
	d.T.Helper()
	a := d.Submit("issue_refund", `{"order_id":"`+order+`","line_id":1,"amount":5,"currency":"EUR"}`, "")
	d.sweepMu.Lock()
	defer d.sweepMu.Unlock()
	d.Advance(3 * time.Minute)
	if _, err := d.Sweeper.Sweep(context.Background()); err != nil {
		d.T.Fatal(err)
	}
	tickets, err := d.Store.TicketList(context.Background(), queue.TicketListParams{ActionID: a.ID})
	if err != nil || len(tickets) != 1 {
		d.T.Fatalf("ticket for %s: %v, %d tickets", a.ID, err, len(tickets))
	}
	return a, tickets[0]
}

// Action reads the action as stored.
func (d *Dashboard) Action(id string) *queue.Action {
	d.T.Helper()
	a, err := d.Store.ActionGetByID(context.Background(), id)
	if err != nil {
		d.T.Fatal(err)
	}
	return a
}

// JSONString is s as a JSON string, for a payload written in a test.
func JSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Browser is one staff member's cookie jar; it does not follow redirects,
// so tests see every 303.
type Browser struct {
	T      testing.TB
	d      *Dashboard
	Client *http.Client
	// csrfMu guards csrf: parallel subtests share one signed-in browser.
	csrfMu sync.Mutex
	csrf   string
}

// Anonymous is a browser with no session. Its requests may wait on bcrypt
// under -race on a loaded machine (ten setups at once hash ten passwords):
// the client timeout is generous because a timeout is not what is tested.
func (d *Dashboard) Anonymous() *Browser {
	jar, _ := cookiejar.New(nil)
	return &Browser{T: d.T, d: d, Client: &http.Client{Jar: jar, Timeout: 2 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Login signs in as email and reads the CSRF token of the signed-in session.
func (d *Dashboard) Login(email string) *Browser {
	d.T.Helper()
	return d.LoginWith(email, Password)
}

// SignIn adds a member of staff with role and signs in as them: the first
// two lines of most dashboard tests.
func (d *Dashboard) SignIn(email string, role accounts.Role) *Browser {
	d.T.Helper()
	d.AddUser(email, role)
	return d.Login(email)
}

// LoginWith is Login with password.
func (d *Dashboard) LoginWith(email, password string) *Browser {
	d.T.Helper()
	b, err := d.TryLogin(email, password)
	if err != nil {
		d.T.Fatal(err)
	}
	return b
}

// TryLogin is LoginWith for goroutines other than the test's: it returns
// what went wrong instead of ending the test.
func (d *Dashboard) TryLogin(email, password string) (*Browser, error) {
	b := d.Anonymous()
	if _, err := b.Try(http.MethodGet, "/login", nil); err != nil {
		return nil, err
	}
	form := url.Values{"email": {email}, "password": {password}, "_csrf": {b.csrf}}
	res, err := b.Try(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	if res.Status != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		return nil, fmt.Errorf("login %s: %d %s %s", email, res.Status, res.Header.Get("Location"), res.Body)
	}
	if res, err := b.Try(http.MethodGet, "/", nil); err != nil || res.Status != http.StatusOK {
		return nil, fmt.Errorf("queue after login: %d %v", res.Status, err)
	}
	return b, nil
}

// Page is one answer of the dashboard.
type Page struct {
	Status int
	Header http.Header
	Body   string
}

// CSRFMeta finds the CSRF token of a dashboard page.
var CSRFMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)"`)

// Do sends a request; a transport error fails the test with t.Errorf and
// a zero page (status 0), never t.Fatal, so that Do is safe on any
// goroutine.
func (b *Browser) Do(method, path string, body io.Reader, hdr ...string) Page {
	b.T.Helper()
	p, err := b.Try(method, path, body, hdr...)
	if err != nil {
		b.T.Errorf("%s %s: %v", method, path, err)
	}
	return p
}

// Try is Do that returns what went wrong.
func (b *Browser) Try(method, path string, body io.Reader, hdr ...string) (Page, error) {
	req, err := http.NewRequest(method, b.d.URL+path, body)
	if err != nil {
		return Page{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.Client.Do(req)
	if err != nil {
		return Page{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return Page{}, err
	}
	p := Page{Status: res.StatusCode, Header: res.Header, Body: string(raw)}
	if m := CSRFMeta.FindStringSubmatch(p.Body); m != nil {
		b.csrfMu.Lock()
		b.csrf = m[1]
		b.csrfMu.Unlock()
	}
	return p, nil
}

// Get is Do of a GET.
func (b *Browser) Get(path string, hdr ...string) Page {
	b.T.Helper()
	return b.Do(http.MethodGet, path, nil, hdr...)
}

// CSRF is the CSRF token of the browser's session, as its last page said.
func (b *Browser) CSRF() string {
	b.csrfMu.Lock()
	defer b.csrfMu.Unlock()
	return b.csrf
}

// Post sends form with the browser's CSRF token, unless form sets _csrf
// itself (a test of a missing or wrong token).
func (b *Browser) Post(path string, form url.Values, hdr ...string) Page {
	b.T.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["_csrf"]; !ok {
		b.csrfMu.Lock()
		form.Set("_csrf", b.csrf)
		b.csrfMu.Unlock()
	}
	return b.Do(http.MethodPost, path, strings.NewReader(form.Encode()), hdr...)
}

// WantStatus fails the test unless the page has status want.
func (p Page) WantStatus(t testing.TB, want int) {
	t.Helper()
	if p.Status != want {
		t.Fatalf("status %d, want %d; body:\n%s", p.Status, want, TruncateBody(p.Body))
	}
}

// WantRedirect fails the test unless the page is a 303 to to.
func (p Page) WantRedirect(t testing.TB, to string) {
	t.Helper()
	p.WantStatus(t, http.StatusSeeOther)
	if got := p.Header.Get("Location"); got != to {
		t.Fatalf("redirect to %q, want %q", got, to)
	}
}

// WantContains fails the test unless the page holds every part.
func (p Page) WantContains(t testing.TB, parts ...string) {
	t.Helper()
	for _, s := range parts {
		if !strings.Contains(p.Body, s) {
			t.Fatalf("page lacks %q:\n%s", s, TruncateBody(p.Body))
		}
	}
}

// TruncateBody is the start of a page, for a failure message.
func TruncateBody(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "…"
	}
	return s
}

// EventCount counts the events of kind for an action.
func (d *Dashboard) EventCount(actionID, kind string) int {
	d.T.Helper()
	evs, err := d.Store.EventList(context.Background(), queue.EventListParams{ActionID: actionID, Kind: kind, Limit: 1000})
	if err != nil {
		d.T.Fatal(err)
	}
	return len(evs)
}
