package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/web"
)

// dashEnv is one dashboard server (apptest) on a fresh PostgreSQL schema.
type dashEnv struct {
	t     *testing.T
	app   *apptest.App
	store storage.Store
	svc   *queue.Service
	srv   *web.Server
	url   string
	*testclock.Clock
	// sweepMu serialises staleTicket's sweeps: a sweep skips the claims
	// another sweep has locked (FOR UPDATE SKIP LOCKED), so a parallel
	// subtest's sweep could be opening this subtest's ticket, uncommitted,
	// when this one lists it.
	sweepMu sync.Mutex
}

const dashPassword = "correct horse battery staple"

// dashPasswordHash is hashed once: bcrypt is slow on purpose, and every
// test user shares the password.
var dashPasswordHash = sync.OnceValue(func() string {
	h, err := accounts.HashPassword(dashPassword)
	if err != nil {
		panic(err)
	}
	return h
})

func startDashboard(t *testing.T) *dashEnv {
	t.Helper()
	return startDashboardWith(t, apptest.Options{})
}

// startDashboardWith starts a dashboard server with opts.
func startDashboardWith(t *testing.T, opts apptest.Options) *dashEnv {
	t.Helper()
	a := apptest.Start(t, opts)
	return &dashEnv{t: t, app: a, store: a.Store, svc: a.Service, srv: a.Server, url: a.URL, Clock: a.Clock}
}

func (d *dashEnv) addUser(email string, role accounts.Role) *accounts.User {
	d.t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	u, err := d.store.UserCreate(context.Background(), &accounts.User{Email: email, PasswordHash: dashPasswordHash(),
		Role: role, CreatedAt: now, PasswordChangedAt: now})
	if err != nil {
		d.t.Fatal(err)
	}
	return u
}

// submitEmail submits a send_customer_email action as agent bot.
func (d *dashEnv) submitEmail(customer, subject, body string) *queue.Action {
	d.t.Helper()
	return d.submit("send_customer_email", `{"customer_id":"`+customer+`","topic":"t","to":"c@example.com","subject":`+
		jsonString(subject)+`,"body":`+jsonString(body)+`}`, "")
}

func (d *dashEnv) submit(tool, payload, key string) *queue.Action {
	d.t.Helper()
	res, err := d.svc.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: []byte(payload), IntentKey: key, Agent: "bot"})
	if err != nil {
		d.t.Fatalf("submit %s: %v", tool, err)
	}
	return res.Action
}

// staleTicket makes an exactly-once claim outlive its claim timeout and
// returns the ticket the sweep opens for it.
func (d *dashEnv) staleTicket(order string) (*queue.Action, *queue.Ticket) {
	d.t.Helper()
	a := d.submit("issue_refund", `{"order_id":"`+order+`","line_id":1,"amount":5,"currency":"EUR"}`, "")
	d.sweepMu.Lock()
	defer d.sweepMu.Unlock()
	d.Advance(3 * time.Minute)
	if _, err := d.app.Sweeper.Sweep(context.Background()); err != nil {
		d.t.Fatal(err)
	}
	tickets, err := d.store.TicketList(context.Background(), queue.TicketListParams{ActionID: a.ID})
	if err != nil || len(tickets) != 1 {
		d.t.Fatalf("ticket for %s: %v, %d tickets", a.ID, err, len(tickets))
	}
	return a, tickets[0]
}

func (d *dashEnv) action(id string) *queue.Action {
	d.t.Helper()
	a, err := d.store.ActionGetByID(context.Background(), id)
	if err != nil {
		d.t.Fatal(err)
	}
	return a
}

func jsonString(s string) string {
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

// browser is one staff member's cookie jar; it does not follow redirects,
// so tests see every 303.
type browser struct {
	t      testing.TB
	d      *dashEnv
	client *http.Client
	// csrfMu guards csrf: parallel subtests share one signed-in browser.
	csrfMu sync.Mutex
	csrf   string
}

// anonymous is a browser with no session. Its requests may wait on bcrypt
// under -race on a loaded machine (ten setups at once hash ten passwords):
// the client timeout is generous because a timeout is not what is tested.
func (d *dashEnv) anonymous() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: d.t, d: d, client: &http.Client{Jar: jar, Timeout: 2 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// login signs in as email and reads the CSRF token of the signed-in session.
func (d *dashEnv) login(email string) *browser {
	d.t.Helper()
	return d.loginWith(email, dashPassword)
}

func (d *dashEnv) loginWith(email, password string) *browser {
	d.t.Helper()
	b, err := d.tryLogin(email, password)
	if err != nil {
		d.t.Fatal(err)
	}
	return b
}

// tryLogin is loginWith for goroutines other than the test's: it returns
// what went wrong instead of ending the test.
func (d *dashEnv) tryLogin(email, password string) (*browser, error) {
	b := d.anonymous()
	if _, err := b.try(http.MethodGet, "/login", nil); err != nil {
		return nil, err
	}
	form := url.Values{"email": {email}, "password": {password}, "_csrf": {b.csrf}}
	res, err := b.try(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	if res.status != http.StatusSeeOther || res.header.Get("Location") != "/" {
		return nil, fmt.Errorf("login %s: %d %s %s", email, res.status, res.header.Get("Location"), res.body)
	}
	if res, err := b.try(http.MethodGet, "/", nil); err != nil || res.status != http.StatusOK {
		return nil, fmt.Errorf("queue after login: %d %v", res.status, err)
	}
	return b, nil
}

type page struct {
	status int
	header http.Header
	body   string
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)"`)

// do sends a request; a transport error fails the test with t.Errorf and
// a zero page (status 0), never t.Fatal, so that do is safe on any
// goroutine.
func (b *browser) do(method, path string, body io.Reader, hdr ...string) page {
	b.t.Helper()
	p, err := b.try(method, path, body, hdr...)
	if err != nil {
		b.t.Errorf("%s %s: %v", method, path, err)
	}
	return p
}

func (b *browser) try(method, path string, body io.Reader, hdr ...string) (page, error) {
	req, err := http.NewRequest(method, b.d.url+path, body)
	if err != nil {
		return page{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.client.Do(req)
	if err != nil {
		return page{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return page{}, err
	}
	p := page{status: res.StatusCode, header: res.Header, body: string(raw)}
	if m := csrfMeta.FindStringSubmatch(p.body); m != nil {
		b.csrfMu.Lock()
		b.csrf = m[1]
		b.csrfMu.Unlock()
	}
	return p, nil
}

func (b *browser) get(path string, hdr ...string) page {
	b.t.Helper()
	return b.do(http.MethodGet, path, nil, hdr...)
}

// post sends form with the browser's CSRF token, unless form sets _csrf
// itself (a test of a missing or wrong token).
func (b *browser) post(path string, form url.Values, hdr ...string) page {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["_csrf"]; !ok {
		b.csrfMu.Lock()
		form.Set("_csrf", b.csrf)
		b.csrfMu.Unlock()
	}
	return b.do(http.MethodPost, path, strings.NewReader(form.Encode()), hdr...)
}

func (p page) wantStatus(t testing.TB, want int) {
	t.Helper()
	if p.status != want {
		t.Fatalf("status %d, want %d; body:\n%s", p.status, want, truncateBody(p.body))
	}
}

func (p page) wantRedirect(t testing.TB, to string) {
	t.Helper()
	p.wantStatus(t, http.StatusSeeOther)
	if got := p.header.Get("Location"); got != to {
		t.Fatalf("redirect to %q, want %q", got, to)
	}
}

func (p page) wantContains(t testing.TB, parts ...string) {
	t.Helper()
	for _, s := range parts {
		if !strings.Contains(p.body, s) {
			t.Fatalf("page lacks %q:\n%s", s, truncateBody(p.body))
		}
	}
}

func truncateBody(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "…"
	}
	return s
}

// eventCount counts the events of kind for an action.
func (d *dashEnv) eventCount(actionID, kind string) int {
	d.t.Helper()
	evs, err := d.store.EventList(context.Background(), queue.EventListParams{ActionID: actionID, Kind: kind, Limit: 1000})
	if err != nil {
		d.t.Fatal(err)
	}
	return len(evs)
}
