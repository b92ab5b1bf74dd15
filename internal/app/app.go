// Package app assembles one approvals server process: storage, service,
// HTTP surface, MCP endpoint and background workers, behind one Run.
// cmd/approvals calls Run with the settings of flags and environment;
// internal/apptest calls the very same Run on port 0 for tests, with the
// test knobs of Config.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/executor"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/mcpserver"
	"github.com/approvals/approvals/slack"
	"github.com/approvals/approvals/sso"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/telegram"

	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/upstream"
	"github.com/approvals/approvals/verifier"
	"github.com/approvals/approvals/web"
)

// Config is everything one server process runs with. cmd/approvals fills
// the production settings from flags and environment; the fields marked as
// test and embedding knobs are left zero there, which is the production
// behaviour.
type Config struct {
	// Logger receives the process's log; default slog.Default().
	Logger *slog.Logger
	// DatabaseURL is the store: postgres://… or sqlite:PATH (OpenStore).
	DatabaseURL string
	// Tools is the tools file (YAML); empty: no tools, every tool is
	// treated as unregistered, at-most-once.
	Tools         string
	WebhookSecret string
	SessionSecret string
	// SweepInterval is how often the sweeper runs; zero: 30s; negative:
	// no sweeper (tests sweep by hand, at a moment of their choosing).
	SweepInterval time.Duration
	MaxBody       int64
	// PprofAddr serves Go's profiles on a listener of its own when set
	// (cmd/approvals allows loopback addresses only).
	PprofAddr string
	// PublicURL is where browsers reach the server (cmd/approvals'
	// default: http:// and the listen address); https:// makes the
	// cookies Secure and __Host- and turns HSTS on.
	PublicURL string
	// TrustedProxies may set X-Forwarded-For.
	TrustedProxies []netip.Prefix
	// MetricsAddr serves /metrics on a listener of its own when set; the
	// main listener then answers 404 there.
	MetricsAddr string
	// Waiters cap concurrent long-polls of agents; MaxStreams
	// (APPROVALS_MAX_STREAMS) the dashboard's event streams;
	// MaxUpstreamCalls (APPROVALS_MAX_UPSTREAM_CALLS) the upstream calls
	// submissions make at once (longpoll.Options, queue.Options).
	Waiters                      longpoll.WaiterLimits
	MaxStreams, MaxUpstreamCalls int
	// Channels are the notification channels' settings: the tools file is
	// judged against them (LoadTools) and the notifiers built from them.
	Channels ChannelSettings
	// OutboxLease is how long a notification being sent stays with its
	// sender before another process may take it (a sender that died); one
	// send is given half of it (maintenance.OutboxConfig.Lease); zero: the
	// default.
	OutboxLease time.Duration
	// SSO is the OpenID provider staff sign in with (APPROVALS_OIDC_*);
	// nil: none (no APPROVALS_OIDC_ISSUER). Its RedirectURL is set from PublicURL. SSORecheck and
	// PasswordLoginOff are the web.Config settings of the same names.
	SSO              *sso.Config
	SSORecheck       time.Duration
	PasswordLoginOff bool
	// AuditLease is the audit sealer's lease (APPROVALS_AUDIT_LEASE): how
	// long sealing pauses when the process holding it dies; zero: the
	// default.
	AuditLease time.Duration

	// The rest are test and embedding knobs; zero is the production
	// behaviour.

	// Store, when set, is the storage Run uses instead of opening
	// DatabaseURL; Run does not close it.
	Store storage.Store
	// WrapQueue, when set, wraps what the service uses (a test injects a
	// fault or spies on it); accounts and metrics still use the store.
	WrapQueue func(queue.Store) queue.Store
	// Registry, when set, are the tools instead of those of the Tools file.
	Registry *classify.Registry
	// Upstreams, when set, are the connections to the upstream MCP servers
	// of a gateway the caller started (StartGateway; it serves App.Tools
	// itself): Run then takes Registry as that gateway imported it and
	// starts no gateway of its own.
	Upstreams *upstream.Manager
	// Notifiers, when set, builds the notification channels over the
	// assembled service instead of the notifiers of Channels (the Slack
	// client records its messages in st and decides through svc).
	Notifiers func(svc *queue.Service, st storage.Store) (Notifiers, error)
	// Ready, when set, is called with the assembled process before it
	// serves (a test reaches the service, the workers and the metrics
	// listener through it).
	Ready func(*App)
	// Now is the service clock; default time.Now.
	Now func() time.Time
	// WaitRecheck is the long-poll's fallback re-read (longpoll.Options).
	WaitRecheck time.Duration
	// LoginLimits throttle failed dashboard logins (web.Config).
	LoginLimits handlers.LoginLimits
	// WrapMCP wraps the MCP endpoint (a test holds a response back).
	WrapMCP func(http.Handler) http.Handler
	// OutboxPoll paces the outbox (maintenance.OutboxConfig.Poll); zero:
	// the default; negative: no outbox runs (tests drive it by hand,
	// App.Outbox, with the notifiers they need).
	OutboxPoll time.Duration
	// BodyReadTimeout and PasswordGate are the web.Config settings of the
	// same names; zero: their defaults.
	BodyReadTimeout time.Duration
	PasswordGate    *accounts.PasswordGate
	// SealInterval is how often the audit sealer looks for new events
	// (maintenance.SealerConfig); zero: the default; negative: no sealer
	// runs (tests seal by hand, App.Sealer).
	SealInterval time.Duration
}

// Notifiers are the channels a process delivers to, by kind
// (classify.KindSlack, …), and the endpoints that take decisions back:
// Slack's interactions and Telegram's webhook, when configured.
type Notifiers struct {
	ByKind       map[string]queue.Notifier
	Interactions *slack.Interactions
	Telegram     *telegram.Webhook
}

// App is one assembled server process.
type App struct {
	Server  *web.Server
	Service *queue.Service
	// Polls are the process's long-polls; Tools the service's tools in
	// force, which the gateway replaces.
	Polls   *longpoll.Polls
	Tools   *queue.CurrentTools
	Metrics *web.Metrics
	// Sweeper, Outbox and Sealer are the background work beside the
	// service (expiry, tickets, reminders; notifications; the audit
	// chain); tests drive them by hand at a moment of their choosing.
	Sweeper *maintenance.Sweeper
	Outbox  *maintenance.Outbox
	Sealer  *maintenance.Sealer
	// dispatcher delivers approved actions of webhook tools; every process
	// runs one, and the claim decides which delivers each action.
	dispatcher *executor.Webhook
	// upstreamExec calls the upstream tools of approved at-most-once
	// actions; nil without upstreams.
	upstreamExec *executor.Upstream
	// notify delivers the outbox's notifications; every process runs a
	// sender, and the lease on each notification decides which sends it.
	notify Notifiers
	// metricsLn is the listener of MetricsAddr, opened by newApp so that a
	// taken address fails start-up before anything is served.
	metricsLn net.Listener
	accounts  accounts.Store
	log       *slog.Logger
	opts      Config
	// stopping closes when shutdown begins (ReleaseWaits).
	stopping chan struct{}
	stopOnce sync.Once
}

// ReleaseWaits begins the shutdown of the requests that wait: every
// long-poll answers now with the current state of its action, and the
// dashboard's live streams end. serve calls it once its context ends.
func (a *App) ReleaseWaits() { a.stopOnce.Do(func() { close(a.stopping) }) }

// newApp assembles a process over st with the tools of reg. queueStore, when
// not nil, is what the service uses instead of st (a test wraps the store
// to inject a fault or spy on it); accounts and metrics still use st. With
// MetricsAddr set, newApp listens there already (serve serves it), so a taken
// address fails start-up.
func newApp(st storage.Store, queueStore queue.Store, reg *classify.Registry, opts Config) (*App, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger
	if queueStore == nil {
		queueStore = st
	}
	var mopts []web.MetricsOption
	if opts.Now != nil {
		// The cached counts age on the service clock, so a test that
		// moves it sees them read again.
		mopts = append(mopts, web.MetricsClock(opts.Now))
	}
	metrics := web.NewMetrics(st, mopts...)
	stopping := make(chan struct{})
	// A submission that a channel hears of wakes this process's outbox.
	outboxWake := make(chan struct{}, 1)
	tools := &queue.CurrentTools{}
	svcOpts := queue.Options{Logger: log, OnSubmit: metrics.OnSubmit, OnPolicy: metrics.OnPolicy, Tools: tools,
		OnEvents: func() {
			select {
			case outboxWake <- struct{}{}:
			default: // a wake-up is already waiting
			}
		},
		Now: opts.Now, MaxUpstreamCalls: opts.MaxUpstreamCalls,
		// The accounts tell the rules of deciding who is in which IdP group.
		Staff: storage.StaffDirectory{Accounts: st}}
	if opts.Upstreams != nil {
		svcOpts.Upstream = opts.Upstreams
	}
	// Verifiers ask the systems of record with the executor's key; each
	// request is bounded by its tool's verify timeout, and never follows a
	// redirect.
	vc := verifier.Config{Secret: opts.WebhookSecret}
	if opts.Upstreams != nil {
		// Upstream verifiers call a read-only tool through the gateway's
		// connections, checked against the upstream's listing at each call
		// (the Gateway logs a failing check loudly when the upstream lists).
		vc.Upstream = opts.Upstreams
		ups := opts.Upstreams
		vc.Refuse = func(tool string) error { return tools.Load().VerifierUpstreamProblem(tool, ups.Listings()) }
	}
	asker, err := verifier.New(vc)
	if err != nil {
		return nil, err
	}
	svcOpts.Verifier = asker
	svcOpts.OnVerified = metrics.OnVerified
	svcOpts.OnTicketResolved = metrics.OnTicketResolved
	svc := queue.NewService(queueStore, reg, svcOpts)
	polls := longpoll.New(queueStore, longpoll.Options{WaitRecheck: opts.WaitRecheck, Waiters: opts.Waiters,
		MaxStreams: opts.MaxStreams, Done: stopping})
	var mcp http.Handler = mcpserver.New(mcpserver.Config{Service: svc, Polls: polls, Store: queueStore, Accounts: st,
		Logger: log, MaxBody: opts.MaxBody})
	if opts.WrapMCP != nil {
		mcp = opts.WrapMCP(mcp)
	}
	var notify Notifiers
	if opts.Notifiers != nil {
		var err error
		if notify, err = opts.Notifiers(svc, st); err != nil {
			return nil, err
		}
	}
	var interactions, telegramWebhook http.Handler
	if notify.Interactions != nil {
		interactions = notify.Interactions
	}
	if notify.Telegram != nil {
		telegramWebhook = notify.Telegram
	}
	var provider *sso.Provider
	if opts.SSO != nil {
		cfg := *opts.SSO
		cfg.RedirectURL = strings.TrimRight(opts.PublicURL, "/") + "/auth/oidc/callback"
		var err error
		// No request yet: the server starts even when the provider is down.
		if provider, err = sso.New(cfg); err != nil {
			return nil, err
		}
	}
	if opts.PasswordLoginOff && provider == nil {
		return nil, errors.New("APPROVALS_PASSWORD_LOGIN=off needs single sign-on (APPROVALS_OIDC_ISSUER): otherwise nobody could sign in")
	}
	srv, err := web.New(web.Config{Service: svc, Polls: polls, Store: queueStore, Accounts: st, Audit: st, Metrics: metrics, Logger: log,
		SlackInteractions: interactions, TelegramWebhook: telegramWebhook,
		MaxBody: opts.MaxBody, SessionSecret: opts.SessionSecret, LoginLimits: opts.LoginLimits,
		PublicURL: opts.PublicURL, TrustedProxies: opts.TrustedProxies, MetricsElsewhere: opts.MetricsAddr != "",
		BodyReadTimeout: opts.BodyReadTimeout, PasswordGate: opts.PasswordGate,
		SSO: provider, SSORecheck: opts.SSORecheck, PasswordLoginOff: opts.PasswordLoginOff,
		MCP: mcp,
		// Live dashboard streams end when shutdown begins, so Shutdown
		// does not wait for open browser tabs.
		Done: stopping})
	if err != nil {
		return nil, err
	}
	dc := executor.WebhookConfig{
		// Each delivery is bounded by its tool's executor timeout; the
		// dispatcher never follows redirects.
		Client:    &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		Secret:    opts.WebhookSecret,
		Logger:    log,
		OnOutcome: func(outcome string) { metrics.Deliveries.WithLabelValues(outcome).Inc() },
	}
	d, err := executor.NewWebhook(queue.NewDispatch(svc), dc)
	if err != nil {
		return nil, err
	}
	a := &App{Server: srv, Service: svc, Polls: polls, Tools: tools, Metrics: metrics, dispatcher: d, notify: notify, accounts: st, log: log, opts: opts,
		stopping: stopping,
		Sweeper:  maintenance.NewSweeper(svc, queueStore, log),
		Outbox: maintenance.NewOutbox(svc, queueStore, maintenance.OutboxConfig{Notifiers: notify.ByKind,
			Lease: opts.OutboxLease, Poll: max(opts.OutboxPoll, 0), Wake: outboxWake, Logger: log, OnNotification: metrics.OnNotification}),
		Sealer: maintenance.NewSealer(st, maintenance.SealerConfig{Lease: opts.AuditLease,
			Interval: max(opts.SealInterval, 0), Logger: log})}
	if opts.Upstreams != nil {
		// Approved at-most-once upstream calls, claimed like webhook deliveries.
		a.upstreamExec = executor.NewUpstream(queue.NewDispatch(svc), opts.Upstreams, executor.UpstreamConfig{Logger: log})
	}
	if addr := opts.MetricsAddr; addr != "" {
		if a.metricsLn, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("APPROVALS_METRICS_ADDR: listen on %s: %w", addr, err)
		}
	}
	return a, nil
}

// MetricsAddr is the address /metrics is served on apart from the main
// listener (APPROVALS_METRICS_ADDR, its port resolved), or nil.
func (a *App) MetricsAddr() net.Addr {
	if a.metricsLn == nil {
		return nil
	}
	return a.metricsLn.Addr()
}

// serve serves HTTP on ln and runs the background workers until ctx ends:
// then it stops accepting and claiming, releases long-polls with the
// current state, lets in-flight requests and deliveries finish, and
// returns nil. It does not close the store.
func (a *App) serve(ctx context.Context, ln net.Listener) error {
	log := a.log
	workers, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	if a.opts.SweepInterval >= 0 {
		interval := a.opts.SweepInterval
		if interval == 0 {
			interval = 30 * time.Second
		}
		wg.Go(func() { a.Sweeper.Run(workers, interval) })
	}
	a.startWorkers(workers, &wg)

	hs := newHTTPServer(a.Server.Handler(), log)
	if mln := a.metricsLn; mln != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", a.Server.MetricsHandler())
		ms := newHTTPServer(mux, log)
		go func() { _ = ms.Serve(mln) }()
		defer ms.Close()
		log.Info("metrics listening", "addr", mln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())

	select {
	case err := <-errc:
		stopWorkers()
		wg.Wait()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests and deliveries")
	stopWorkers()    // no new claims; a delivery under way runs to its end
	a.ReleaseWaits() // long-polls answer now with the current state
	sctx, cancel := context.WithTimeout(context.Background(), web.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
	}
	wg.Wait()
	// Long-polls the HTTP server handed over (hijacked connections) are
	// not among what its Shutdown waits for; they answer once
	// ReleaseWaits, and must before the store closes.
	a.Polls.WaitPolls()
	// Submissions whose upstream call outlived the HTTP server's wait:
	// their outcome is recorded before the store closes; then the outcomes
	// learnt while the database was away get one last try each.
	a.Service.Shutdown(context.Background())
	if a.notify.Interactions != nil {
		a.notify.Interactions.Wait() // ephemeral Slack replies under way
	}
	if a.notify.Telegram != nil {
		a.notify.Telegram.Wait() // answers to Telegram under way
	}
	log.Info("stopped")
	return nil
}

// startWorkers starts the background workers besides the sweeper. When ctx
// ends they stop claiming; wg is done once the deliveries under way have
// finished.
func (a *App) startWorkers(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { a.dispatcher.Run(ctx) })
	if a.opts.OutboxPoll >= 0 {
		wg.Go(func() { a.Outbox.Run(ctx) })
	}
	if a.opts.SealInterval >= 0 && sealerBuilt {
		// Every process runs one; the lease lets one seal at a time.
		wg.Go(func() { a.Sealer.Run(ctx) })
	}
	if a.upstreamExec != nil {
		wg.Go(func() { a.upstreamExec.Run(ctx) })
	}
	wg.Go(func() { a.pruneAccounts(ctx, 10*time.Minute) })
}

// pruneAccounts deletes expired sessions and day-old login failures, so
// neither accumulates. (Anonymous visitors write no session rows: their
// CSRF token lives in a signed cookie.)
func (a *App) pruneAccounts(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		now := time.Now().UTC()
		if err := a.accounts.AccountsPrune(ctx, accounts.AccountsPruneParams{Now: now, FailuresBefore: now.Add(-24 * time.Hour)}); err != nil && ctx.Err() == nil {
			a.log.Warn("prune sessions and login failures", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Timeouts of the HTTP server. A slow client may hold a connection only so
// long: sending its headers (here), sending its body (web's body-read
// timeout, 30s, which lifts once the body is in) or idling between
// requests (here). There is no WriteTimeout, nor ReadTimeout: either would
// cut long-polls (up to longpoll.MaxWait) and the dashboard's event streams
// (Go cancels a request's context when ReadTimeout passes, body read or
// not); those end by themselves, are capped by APPROVALS_MAX_WAITERS, and
// end at shutdown.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
)

func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}
