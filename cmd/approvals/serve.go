package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/upstream"
)

// serve runs the server until SIGTERM or SIGINT: then it stops accepting and
// claiming, lets in-flight requests and deliveries finish, closes storage
// and returns nil (exit 0).
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, err := parseServeConfig(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	log, stopTracing, err := app.StartTracing(ctx, log)
	if err != nil {
		return err
	}
	// After the last request and delivery: their spans go out too.
	defer stopTracing()
	tuneGC()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// After the first signal, a second one ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	return serveOn(ctx, cfg, ln, log)
}

// browsableAddr is addr as a browser can open it: a server listening on
// every interface (":8080" is "[::]:8080") is reached through localhost.
func browsableAddr(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return net.JoinHostPort("localhost", strconv.Itoa(tcp.Port))
	}
	return addr.String()
}

// tuneGC trades memory the server does not use for CPU it does: its live
// heap is small (about 10 MiB under load), so the default GOGC=100 collects
// very often; under the write benchmark the collector took about 15% of the
// server's CPU. GOGC=400 lets the heap grow to five times the live data. A
// soft limit of 192 MiB caps that trade: the heap goal counts goroutine
// stacks, so ten thousand long-polls (about 75 MiB of heap and stacks)
// would otherwise let garbage grow past 300 MiB before a collection, and
// with the limit a collection comes first (issue 29: RSS 206 against
// 264-297 MiB, submissions beside them unchanged). Under the submission
// load the heap stays far below it. GOGC and GOMEMLIMIT in the environment
// win.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}

// defaultMemoryLimit is the soft memory limit of tuneGC.
const defaultMemoryLimit = 192 << 20

// serveOn runs the server on ln until ctx ends. Tests call it on :0.
func serveOn(ctx context.Context, cfg config, ln net.Listener, log *slog.Logger) error {
	reg, err := loadTools(cfg.Tools, cfg.WebhookSecret, cfg.Channels)
	if err != nil {
		ln.Close()
		return err
	}
	gw, reg, err := app.StartGateway(ctx, reg, log)
	if err != nil {
		ln.Close()
		return fmt.Errorf("tools file %s: %w", cfg.Tools, err)
	}
	defer gw.Close() // Serve returns once every call under way (executor or submission) is recorded
	if cfg.Tools == "" {
		log.Warn("no tools file (APPROVALS_TOOLS): every tool is treated as unregistered, at-most-once")
	} else {
		log.Info("tools loaded", "file", cfg.Tools, "sha256", reg.Hash, "tools", len(reg.Tools()))
	}
	st, where, err := app.OpenStore(ctx, cfg.DatabaseURL)
	if err != nil {
		ln.Close()
		return err
	}
	defer st.Close()
	log.Info("storage ready", "store", where)

	var upstreams *upstream.Manager
	if gw != nil {
		upstreams = gw.Manager
	}
	a, err := app.New(st, nil, reg, app.Options{Logger: log, MaxBody: cfg.MaxBody,
		SessionSecret: cfg.SessionSecret, WebhookSecret: cfg.WebhookSecret, SweepInterval: cfg.SweepInterval,
		PublicURL: cfg.PublicURL, TrustedProxies: cfg.TrustedProxies, MetricsAddr: cfg.MetricsAddr, Waiters: cfg.Waiters,
		MaxStreams: cfg.MaxStreams, MaxUpstreamCalls: cfg.MaxUpstreamCalls,
		Upstreams: upstreams, OutboxLease: cfg.OutboxLease, AuditLease: cfg.AuditLease,
		SSO: cfg.SSO, SSORecheck: cfg.SSORecheck, PasswordLoginOff: cfg.PasswordLoginOff,
		Notifiers: func(svc *queue.Service, st storage.Store) (app.Notifiers, error) {
			return newNotifiers(cfg, svc, st, log)
		}})
	if err == nil && gw != nil {
		gw.Serve(a.Tools)
	}
	if err != nil {
		ln.Close()
		return err
	}
	base := "http://" + browsableAddr(ln.Addr())
	if cfg.SSO != nil {
		log.Info("single sign-on", "issuer", cfg.SSO.Issuer, "redirect_uri", cfg.PublicURL+"/auth/oidc/callback",
			"post_logout_redirect_uri", cfg.PublicURL+"/login", "roles", cfg.SSO.Roles.String(), "password_login", !cfg.PasswordLoginOff)
	}
	if link, err := a.Server.SetupURL(ctx, base); err != nil {
		log.Warn("could not prepare the setup link", "err", err)
	} else if link != "" {
		log.Info("no users yet: open this one-time link to create the first admin", "url", link)
	}

	if addr := cfg.PprofAddr; addr != "" {
		// Opt-in profiling on its own listener, never on the public one.
		go func() {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			log.Info("pprof listening", "addr", addr)
			if err := http.ListenAndServe(addr, mux); err != nil {
				log.Warn("pprof", "err", err)
			}
		}()
	}
	return a.Serve(ctx, ln)
}

// loopback reports whether addr ("host:port") is on a loopback interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
