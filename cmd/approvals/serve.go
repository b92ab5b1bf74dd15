package main

import (
	"context"
	"errors"
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
	"sync"
	"syscall"
	"time"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/web"
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
// soft limit of 512 MiB reins that in only when the live heap itself is
// large (many concurrent requests with big bodies), well above it so the
// collector never runs back to back. GOGC and GOMEMLIMIT in the
// environment win.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(512 << 20)
	}
}

// serveOn runs the server on ln until ctx ends. Tests call it on :0.
func serveOn(ctx context.Context, cfg config, ln net.Listener, log *slog.Logger) error {
	reg, err := loadTools(cfg.Tools, cfg.WebhookSecret, cfg.Channels)
	if err != nil {
		ln.Close()
		return err
	}
	if len(reg.Upstreams()) > 0 {
		// Until the gateway's executor is wired, an upstream tool served here would be
		// taken for one the agent executes itself: refuse rather than guess.
		ln.Close()
		return fmt.Errorf("tools file %s: upstreams are not served yet; check the file with approvals tools check", cfg.Tools)
	}
	if cfg.Tools == "" {
		log.Warn("no tools file (APPROVALS_TOOLS): every tool is treated as unregistered, at-most-once")
	} else {
		log.Info("tools loaded", "file", cfg.Tools, "sha256", reg.Hash, "tools", len(reg.Tools()))
	}
	st, where, err := openStore(ctx, cfg.DatabaseURL)
	if err != nil {
		ln.Close()
		return err
	}
	defer st.Close()
	log.Info("storage ready", "store", where)

	metrics := web.NewMetrics(st)
	svc := queue.NewService(st, reg, queue.Options{Logger: log, OnSubmit: metrics.OnSubmit, OnNotification: metrics.OnNotification})
	base := "http://" + browsableAddr(ln.Addr())
	if cfg.PublicURL == "" {
		cfg.PublicURL = base
	}
	notify, err := newNotifiers(cfg, svc, st, log)
	if err != nil {
		ln.Close()
		return err
	}
	app, err := newApp(ctx, cfg, svc, st, metrics, log, notify)
	if err != nil {
		ln.Close()
		return err
	}
	if link, err := app.server.SetupURL(ctx, base); err != nil {
		log.Warn("could not prepare the setup link", "err", err)
	} else if link != "" {
		log.Info("no users yet: open this one-time link to create the first admin", "url", link)
	}

	workers, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { svc.RunSweeper(workers, cfg.SweepInterval) })
	app.startWorkers(workers, &wg)

	if addr := cfg.PprofAddr; addr != "" {
		// Opt-in profiling on its own listener, never on the public one.
		go func() {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			log.Info("pprof listening", "addr", addr)
			if err := http.ListenAndServe(addr, mux); err != nil {
				log.Warn("pprof", "err", err)
			}
		}()
	}
	hs := &http.Server{Handler: app.server.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
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
	stopWorkers() // no new claims; a delivery under way runs to its end
	svc.Stop()    // long-polls answer now with the current state
	sctx, cancel := context.WithTimeout(context.Background(), web.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
	}
	wg.Wait()
	if notify.interactions != nil {
		notify.interactions.Wait() // ephemeral Slack replies under way
	}
	log.Info("stopped")
	return nil
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
