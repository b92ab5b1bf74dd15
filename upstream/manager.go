// Package upstream is the client side of the MCP gateway: it connects to the upstream MCP
// servers of the tools file (Streamable HTTP, or stdio processes it starts and supervises),
// keeps their tool lists current, and calls one upstream tool once, saying what is known of
// the outcome. It never repeats a call: whether a call may be made at all is the caller's
// claim, recorded before Call.
//
// It is an adapter beside the stores: it knows classify's types and the official MCP Go SDK,
// and nothing of HTTP handlers, the dashboard or the MCP face.
package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
)

// Defaults of Options.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = time.Minute
)

// Options tune a Manager. The zero value is usable.
type Options struct {
	// ConnectTimeout bounds one attempt to connect to an upstream and list its tools, and so
	// how long Start can wait (attempts run in parallel). Default 10s.
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before reconnecting to an upstream (or
	// restarting its process); the wait doubles after each failed attempt. Defaults 1s, 1m.
	MinBackoff, MaxBackoff time.Duration
	// OnChange is called, from a background goroutine, whenever an upstream's tool list or
	// availability changes, so that the caller can Import the Listings anew.
	OnChange func()
	// HTTPClient is the base client for Streamable HTTP upstreams; default http.DefaultClient's
	// transport with no overall timeout (a tool call's timeout is the upstream's).
	HTTPClient *http.Client
	// Stderr receives the stderr of stdio upstream processes; default os.Stderr.
	Stderr io.Writer
	Logger *slog.Logger
}

// Manager holds one supervised connection per upstream. Its methods are safe for concurrent use.
type Manager struct {
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  map[string]*conn
}

// conn is the state of one upstream, guarded by mu.
type conn struct {
	cfg     classify.Upstream
	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []classify.UpstreamTool // the last list seen, kept while the upstream is down
	down    string                  // why there is no session; "" when connected
	// relist asks the supervisor to list the tools again (the upstream said they changed);
	// lost tells it that a call saw this session's connection break (a later session of the
	// same upstream is not affected).
	relist chan struct{}
	lost   chan *mcp.ClientSession
}

// Start connects to every upstream in parallel and returns once each has connected or failed
// its first attempt, so at most about Options.ConnectTimeout later. An upstream that fails is
// listed as unavailable with the reason and retried in the background until Close.
func Start(ctx context.Context, upstreams []classify.Upstream, opts Options) *Manager {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: opts, conns: map[string]*conn{}}
	// The supervisors outlive ctx's request, if any, but not its values.
	m.ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	var first sync.WaitGroup
	for _, u := range upstreams {
		c := &conn{cfg: u, down: "connecting", relist: make(chan struct{}, 1), lost: make(chan *mcp.ClientSession, 1)}
		m.conns[u.Name] = c
		first.Add(1)
		m.wg.Go(func() { m.supervise(c, sync.OnceFunc(first.Done)) })
	}
	first.Wait()
	return m
}

// Listings returns, per upstream, its tools and whether it is available, for classify's
// Registry.Import.
func (m *Manager) Listings() map[string]classify.UpstreamListing {
	out := make(map[string]classify.UpstreamListing, len(m.conns))
	for name, c := range m.conns {
		c.mu.Lock()
		out[name] = classify.UpstreamListing{Tools: slices.Clone(c.tools), Unavailable: c.down}
		c.mu.Unlock()
	}
	return out
}

// Close ends every connection and stops the stdio processes, waiting for them to exit.
func (m *Manager) Close() error {
	m.cancel()
	m.wg.Wait()
	return nil
}

func (m *Manager) changed() {
	if m.opts.OnChange != nil {
		m.opts.OnChange()
	}
}

// supervise keeps one upstream connected until the Manager closes: connect and list, wait
// for the session to end (a crashed process, a dropped connection), then back off and
// reconnect, which restarts a stdio process. firstDone is called after the first attempt.
func (m *Manager) supervise(c *conn, firstDone func()) {
	defer firstDone()
	backoff := m.opts.MinBackoff
	log := m.opts.Logger.With("upstream", c.cfg.Name)
	for {
		cs, tools, err := m.connect(c)
		if err != nil {
			c.setDown(err.Error())
			log.Warn("upstream unavailable", "err", err, "retry_in", backoff)
		} else {
			backoff = m.opts.MinBackoff
			c.setUp(cs, tools)
			log.Info("upstream connected", "tools", len(tools))
		}
		firstDone()
		m.changed()
		if err == nil {
			reason := m.serve(c, cs)
			c.setDown(reason)
			log.Warn("upstream connection ended", "reason", reason, "retry_in", backoff)
			m.changed()
		}
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, m.opts.MaxBackoff)
	}
}

// serve watches a connected session until it ends and says why.
func (m *Manager) serve(c *conn, cs *mcp.ClientSession) string {
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	for {
		select {
		case <-m.ctx.Done():
			_ = cs.Close() // for stdio: close stdin, then SIGTERM, then SIGKILL
			<-ended
			return "approvals is shutting down"
		case err := <-ended:
			if err != nil {
				return "connection lost: " + err.Error()
			}
			return "connection lost"
		case lostSession := <-c.lost:
			if lostSession != cs {
				continue
			}
			// Closing a session whose peer vanished can take seconds (the HTTP client
			// says goodbye to a server that is gone); reconnect meanwhile.
			m.wg.Go(func() {
				_ = cs.Close()
				<-ended
			})
			return "connection lost during a call"
		case <-c.relist:
			ctx, cancel := context.WithTimeout(m.ctx, m.opts.ConnectTimeout)
			tools, err := listTools(ctx, cs)
			cancel()
			if err != nil {
				_ = cs.Close()
				<-ended
				return "listing tools failed: " + err.Error()
			}
			c.setUp(cs, tools)
			m.changed()
		}
	}
}

func (c *conn) setUp(cs *mcp.ClientSession, tools []classify.UpstreamTool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.session, c.tools, c.down = cs, tools, ""
}

func (c *conn) setDown(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The reason reaches logs, /tools, the API and refusals: an error that
	// names the URL must not carry its credentials.
	c.session, c.down = nil, classify.RedactURLsIn(reason)
}

// inheritedEnv is what a stdio upstream gets of approvals' own environment:
// what a program needs to run (as the MCP SDKs pass by default), never the
// database URL, the signing secrets or the tokens approvals holds. Anything
// else it needs is named in the upstream's env: in the tools file.
func inheritedEnv() []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

func (c *conn) current() (*mcp.ClientSession, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session, c.down
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // one pending signal is enough
	}
}

// connect starts the transport, initialises the session and lists the tools, all within
// ConnectTimeout; a stdio process that does not make it is stopped.
func (m *Manager) connect(c *conn) (*mcp.ClientSession, []classify.UpstreamTool, error) {
	ctx, cancel := context.WithTimeout(m.ctx, m.opts.ConnectTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "approvals", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { signal(c.relist) },
		Capabilities:           &mcp.ClientCapabilities{}, // no roots: approvals has no files to offer
	})
	var transport mcp.Transport
	if c.cfg.URL != "" {
		hc := *m.opts.HTTPClient
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		hc.Transport = &headerTransport{headers: c.cfg.Headers, base: base}
		// The configured headers (a bearer token, say) are added to every
		// request by the transport, so a redirect would carry them to any
		// host: none is followed.
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		// MaxRetries -1: a dropped stream ends the session at once and the supervisor
		// reconnects, rather than the SDK trying to resume it for seconds meanwhile.
		transport = &mcp.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: &hc, MaxRetries: -1}
	} else {
		// Not exec.CommandContext: the process must outlive this attempt's deadline.
		cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
		cmd.Env = inheritedEnv()
		for _, k := range slices.Sorted(maps.Keys(c.cfg.Env)) {
			cmd.Env = append(cmd.Env, k+"="+c.cfg.Env[k])
		}
		cmd.Stderr = m.opts.Stderr
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	tools, err := listTools(ctx, cs)
	if err != nil {
		_ = cs.Close()
		return nil, nil, fmt.Errorf("list tools: %w", err)
	}
	return cs, tools, nil
}

// listTools reads every page of the upstream's tool list.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([]classify.UpstreamTool, error) {
	var out []classify.UpstreamTool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		ut := classify.UpstreamTool{Name: t.Name, Description: t.Description}
		if t.InputSchema != nil {
			js, err := json.Marshal(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
			}
			ut.InputSchema = js
		}
		if a := t.Annotations; a != nil {
			// The SDK cannot tell an absent readOnlyHint or idempotentHint from false;
			// MCP's default for both is false, so nil says the same.
			if a.ReadOnlyHint {
				ut.Annotations.ReadOnlyHint = &a.ReadOnlyHint
			}
			if a.IdempotentHint {
				ut.Annotations.IdempotentHint = &a.IdempotentHint
			}
			ut.Annotations.OpenWorldHint = a.OpenWorldHint
		}
		out = append(out, ut)
	}
	slices.SortFunc(out, func(a, b classify.UpstreamTool) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

// headerTransport adds the upstream's configured headers to every request.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}
