package app_test

import (
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres/pgtest"
)

// silentProxy forwards connections to PostgreSQL until Silence; from then
// on it drops the connections it forwarded and accepts new ones without
// ever answering, as a database host behind a partition or a hung server
// does (a connection that is refused is the easy case).
type silentProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	silent bool
	conns  []net.Conn
	frozen atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func newSilentProxy(t *testing.T, target string) *silentProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProxy{ln: ln, target: target, closed: make(chan struct{})}
	t.Cleanup(p.Close)
	go p.serve()
	return p
}

func (p *silentProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		silent := p.silent
		p.mu.Unlock()
		if silent {
			continue // held open, never answered
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, up)
		p.mu.Unlock()
		go p.pump(up, c)
		go p.pump(c, up)
	}
}

// pump copies src to dst; while the proxy is frozen it holds what it read.
func (p *silentProxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.frozen.Load() {
				<-p.closed
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
}

// Freeze stops answering on the connections open now, keeping them open,
// and answers no new one: a host that hangs, or a partition.
func (p *silentProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.silent = true
	p.frozen.Store(true)
}

// Close stops listening and drops every connection: a refused database.
func (p *silentProxy) Close() {
	_ = p.ln.Close()
	p.once.Do(func() { close(p.closed) })
	p.Silence()
}

// Silence drops every forwarded connection and answers no new one.
func (p *silentProxy) Silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.silent = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestSilentDatabaseAnswersUnavailable: section 20, "while the database
// cannot be reached, requests answer 503 unavailable with Retry-After",
// for a database that does not answer at all (a partition, a hung host),
// with a connection string that sets no connect_timeout: the API, the MCP
// endpoint and the dashboard answer 503 with Retry-After within seconds.
// Without a default connect timeout a new connection waited for the
// request's own deadline: 30 s for the API, two minutes for a page.
func TestSilentDatabaseAnswersUnavailable(t *testing.T) {
	t.Parallel()
	direct, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newSilentProxy(t, direct.Host)
	proxied := *direct
	proxied.Host = proxy.ln.Addr().String()
	a := apptest.StartOn(t, proxied.String(), apptest.Options{})
	// Before the process shuts down, the database refuses instead of
	// staying silent, so the shutdown does not wait on it.
	t.Cleanup(proxy.Close)
	d := &apptest.Dashboard{App: a, Clock: a.Clock, T: t}
	staff := d.SignIn("ann@example.com", accounts.RoleApprover)
	token := a.Token(t, "agent")
	staff.Get("/").WantStatus(t, http.StatusOK)

	proxy.Silence()
	client := &http.Client{Timeout: 20 * time.Second}
	for _, path := range []string{"/api/v1/actions?intent_key=k", "/"} {
		req, _ := http.NewRequest("GET", a.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		for _, c := range staff.Client.Jar.Cookies(req.URL) {
			req.AddCookie(c)
		}
		began := time.Now()
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s while the database is silent: %v (after %v), want 503 within seconds", path, err, time.Since(began).Round(time.Millisecond))
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s while the database is silent: %d Retry-After %q, want 503 with Retry-After", path, res.StatusCode, res.Header.Get("Retry-After"))
		}
		took := time.Since(began)
		t.Logf("GET %s: %d after %v", path, res.StatusCode, took.Round(time.Millisecond))
		if took > 15*time.Second {
			t.Errorf("GET %s took %v to answer 503", path, took.Round(time.Millisecond))
		}
	}
}

// TestFrozenDatabaseAnswersUnavailable: section 20 for a database that
// stops answering on the connections already open (a hung host, a
// partition): a dashboard page is answered 503 with Retry-After within the
// request's deadline. Without one it waited on its statement until TCP gave
// up, many minutes.
func TestFrozenDatabaseAnswersUnavailable(t *testing.T) {
	t.Parallel()
	direct, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newSilentProxy(t, direct.Host)
	proxied := *direct
	proxied.Host = proxy.ln.Addr().String()
	a := apptest.StartOn(t, proxied.String(), apptest.Options{})
	t.Cleanup(proxy.Close)
	d := &apptest.Dashboard{App: a, Clock: a.Clock, T: t}
	staff := d.SignIn("ann@example.com", accounts.RoleApprover)
	staff.Get("/").WantStatus(t, http.StatusOK)

	proxy.Freeze()
	client := &http.Client{Timeout: time.Minute, Jar: staff.Client.Jar}
	began := time.Now()
	res, err := client.Get(a.URL + "/")
	if err != nil {
		t.Fatalf("GET / while the database is frozen: %v (after %v), want 503", err, time.Since(began).Round(time.Millisecond))
	}
	_ = res.Body.Close()
	t.Logf("GET /: %d after %v", res.StatusCode, time.Since(began).Round(time.Millisecond))
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("GET / while the database is frozen: %d Retry-After %q, want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
}
