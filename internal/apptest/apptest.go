// Package apptest starts the whole approvals process (app.Run, the very
// function cmd/approvals runs) on port 0 over a fresh PostgreSQL schema or
// SQLite file, with an injected clock. It is the one test harness of the
// web, MCP and end-to-end tests.
package apptest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/sqlite"
	"github.com/approvals/approvals/sso"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/upstream"
)

// Options change what Start assembles; the zero value is a PostgreSQL
// process with the tools of tools.example.yaml and a running clock.
type Options struct {
	// SQLite stores in a fresh SQLite file instead of PostgreSQL.
	SQLite bool
	// Tools are the registered tools; default tools.example.yaml.
	Tools *classify.Registry
	// Clock is the service clock; default testclock.Running().
	Clock *testclock.Clock
	// WrapStore wraps what the service uses (a spy or an injected fault).
	WrapStore func(queue.Store) queue.Store
	// WrapAll wraps the storage of the whole process, accounts and
	// metrics too (a spy on account writes or count queries); WrapStore,
	// when set, wraps the result for the service.
	WrapAll func(storage.Store) storage.Store
	// WrapMCP wraps the MCP endpoint.
	WrapMCP func(http.Handler) http.Handler
	// WaitRecheck is the long-poll's fallback re-read; default one
	// minute, longer than any test's wait, so that a long-poll test passes
	// only when the change notification itself wakes the poll.
	WaitRecheck time.Duration
	// ManualOutbox: the process runs no outbox of its own (it has no
	// notifiers here, so one would take the test's notifications and fail
	// them); the test drives one with the notifiers it needs.
	ManualOutbox bool
	// Sweep runs the background sweeper every Sweep; 0: none, a test
	// sweeps by hand (App.Sweeper) when it has moved the clock.
	Sweep time.Duration
	// Seal runs the audit sealer every Seal; 0: none, a test seals by
	// hand (App.Sealer), so that many parallel processes do not poll.
	Seal time.Duration
	// MaxBody, WebhookSecret, SessionSecret and LoginLimits are the
	// process settings of the same names.
	MaxBody       int64
	WebhookSecret string
	SessionSecret string
	LoginLimits   handlers.LoginLimits
	// Logger, default discarding.
	Logger *slog.Logger
	// PublicURL, TrustedProxies, MetricsAddr, Waiters, MaxStreams, BodyReadTimeout and
	// PasswordGate are the app.Config fields of the same names; MetricsAddr is
	// typically "127.0.0.1:0" (App.MetricsURL says where it listens).
	PublicURL       string
	TrustedProxies  []netip.Prefix
	MetricsAddr     string
	Waiters         longpoll.WaiterLimits
	MaxStreams      int
	BodyReadTimeout time.Duration
	PasswordGate    *accounts.PasswordGate
	// SSO, SSORecheck and PasswordLoginOff are the app.Config fields of the
	// same names; with SSO and no PublicURL, the public URL is the
	// process's own (the provider sends browsers back there).
	SSO              *sso.Config
	SSORecheck       time.Duration
	PasswordLoginOff bool
	// Upstreams is the app.Config field of the same name (a gateway the test
	// started, app.StartGateway; it serves the process's service).
	Upstreams *upstream.Manager
}

// App is one running process.
type App struct {
	*app.App
	// Store is the process's storage (both halves), unwrapped.
	Store storage.Store
	// URL is the base URL, such as http://127.0.0.1:41234.
	URL string
	// DatabaseURL is the PostgreSQL database ("" on SQLite); AddServer
	// starts another process on it.
	DatabaseURL string
	// SQLitePath is the SQLite file ("" on PostgreSQL).
	SQLitePath string
	// MetricsURL is the base URL of the metrics listener ("" without
	// Options.MetricsAddr).
	MetricsURL string
	Clock      *testclock.Clock
	opts       Options
}

// ExampleTools returns the tools of the repository's tools.example.yaml.
func ExampleTools(t testing.TB) *classify.Registry {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "tools.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := classify.Parse(b, classify.Options{})
	if err != nil {
		t.Fatalf("parse tools.example.yaml: %v", err)
	}
	return reg
}

// Start starts a process on fresh storage; t.Cleanup shuts it down as
// SIGTERM would and waits for it.
func Start(t testing.TB, opts Options) *App {
	t.Helper()
	opts.Tools, opts.Clock = toolsAndClock(t, opts.Tools, opts.Clock)
	if opts.WaitRecheck == 0 {
		opts.WaitRecheck = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SQLite {
		path := filepath.Join(t.TempDir(), "approvals.db")
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		a := start(t, s, "", opts)
		a.SQLitePath = path
		return a
	}
	u := pgtest.URL(t)
	return start(t, pgtest.OpenURL(t, u), u, opts)
}

// StartOn starts a process on the PostgreSQL database at dbURL (a cluster
// the test started, a failover pair's two hosts), migrating it first.
func StartOn(t testing.TB, dbURL string, opts Options) *App {
	t.Helper()
	opts.Tools, opts.Clock = toolsAndClock(t, opts.Tools, opts.Clock)
	if opts.WaitRecheck == 0 {
		opts.WaitRecheck = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return start(t, pgtest.OpenURL(t, dbURL), dbURL, opts)
}

// AddServer starts another process with the same options on the same
// PostgreSQL database, with its own pool and LISTEN connection, as a
// second `approvals serve` would. wrap, when not nil, replaces the
// WrapStore option for the new process.
func (a *App) AddServer(t testing.TB, wrap func(queue.Store) queue.Store) *App {
	t.Helper()
	if a.DatabaseURL == "" {
		t.Fatal("AddServer needs PostgreSQL: several processes share one database")
	}
	opts := a.opts
	if wrap != nil {
		opts.WrapStore = wrap
	}
	return start(t, pgtest.OpenURL(t, a.DatabaseURL), a.DatabaseURL, opts)
}

// start runs app.Run, the assembly cmd/approvals runs, over st on a port-0
// listener, and returns once the process is assembled.
func start(t testing.TB, st storage.Store, dbURL string, opts Options) *App {
	t.Helper()
	unwrapped := st
	if opts.WrapAll != nil {
		st = opts.WrapAll(st)
	}
	sweep := opts.Sweep
	if sweep == 0 {
		sweep = -1
	}
	seal := opts.Seal
	if seal == 0 {
		seal = -1
	}
	outboxPoll := time.Duration(0)
	if opts.ManualOutbox {
		outboxPoll = -1
	}
	if opts.PasswordGate == nil {
		// Tests sign many users in at once, and bcrypt under -race on a
		// loaded machine is slow: the same four slots as in production,
		// but a sign-in waits for one instead of being turned away after
		// 2s. TestLoginPasswordGate sets its own gate to test the refusal.
		opts.PasswordGate = accounts.NewPasswordGate(4, 2*time.Minute)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	publicURL := opts.PublicURL
	if publicURL == "" && opts.SSO != nil {
		publicURL = url
	}
	ready := make(chan *app.App, 1)
	cfg := app.Config{Logger: opts.Logger, MaxBody: opts.MaxBody,
		SessionSecret: opts.SessionSecret, WebhookSecret: opts.WebhookSecret, SweepInterval: sweep, SealInterval: seal,
		Now: opts.Clock.Now, WaitRecheck: opts.WaitRecheck, LoginLimits: opts.LoginLimits, WrapMCP: opts.WrapMCP,
		PublicURL: publicURL, TrustedProxies: opts.TrustedProxies, MetricsAddr: opts.MetricsAddr,
		Waiters: opts.Waiters, MaxStreams: opts.MaxStreams, BodyReadTimeout: opts.BodyReadTimeout, PasswordGate: opts.PasswordGate,
		SSO: opts.SSO, SSORecheck: opts.SSORecheck, PasswordLoginOff: opts.PasswordLoginOff, OutboxPoll: outboxPoll,
		Upstreams: opts.Upstreams,
		Store:     st, WrapQueue: opts.WrapStore, Registry: opts.Tools,
		// No channel can be told anything: a test that needs notifiers
		// drives an outbox of its own (ManualOutbox).
		Notifiers: func(*queue.Service, storage.Store) (app.Notifiers, error) { return app.Notifiers{}, nil },
		Ready:     func(a *app.App) { ready <- a }}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- app.Run(ctx, cfg, ln) }()
	var a *app.App
	select {
	case a = <-ready:
	case err := <-served:
		stop()
		if err == nil {
			err = errors.New("app.Run returned before it served")
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	out := &App{App: a, Store: unwrapped, URL: url, DatabaseURL: dbURL, Clock: opts.Clock, opts: opts}
	if addr := a.MetricsAddr(); addr != nil {
		out.MetricsURL = "http://" + addr.String()
	}
	return out
}

// Token creates an agent token named name and returns it.
func (a *App) Token(t testing.TB, name string) string {
	t.Helper()
	tok, hash := accounts.NewToken()
	if _, err := a.Store.TokenCreate(context.Background(), accounts.TokenCreateParams{Name: name, Hash: hash, Now: time.Now()}); err != nil {
		t.Fatalf("create token %s: %v", name, err)
	}
	return tok
}

// AwaitWaiters returns once at least n long-polls of this process have
// subscribed, read their action and wait for a change (the
// approvals_waiters gauge); it fails the test after 30 s.
func (a *App) AwaitWaiters(t testing.TB, n int64) {
	t.Helper()
	AwaitWaiters(t, a.Polls, n)
}

// Metric scrapes /metrics and returns the value of the sample named series
// exactly as exposed, such as `approvals_waiters` or
// `approvals_webhook_deliveries_total{outcome="done"}`; a series not
// exposed fails the test. It scrapes the metrics listener when there is one.
func (a *App) Metric(t testing.TB, series string) float64 {
	t.Helper()
	base := a.URL
	if a.MetricsURL != "" {
		base = a.MetricsURL
	}
	return ScrapeMetric(t, base, series)
}

// ScrapeMetric is App.Metric for the server at base (a Process, say).
func ScrapeMetric(t testing.TB, base, series string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return f
		}
	}
	t.Fatalf("metric %s is not exposed:\n%s", series, b)
	return 0
}
