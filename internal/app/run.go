package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
)

// Run runs one server process on ln until ctx ends: it loads the tools
// file, connects to its upstreams (the gateway), opens the store, builds
// the notifiers, assembles the service, the HTTP surface, the MCP endpoint
// and the workers, logs the setup link while no admin exists, serves the
// opt-in profiles, and serves ln. Once ctx ends it stops accepting and
// claiming, lets in-flight requests and deliveries finish, closes what it
// opened and returns nil. cmd/approvals calls it with the settings of
// flags and environment, internal/apptest on port 0. Run closes ln.
func Run(ctx context.Context, cfg Config, ln net.Listener) (err error) {
	defer func() {
		if err != nil {
			ln.Close() // serve closes it once it serves
		}
	}()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger
	reg := cfg.Registry
	if reg == nil {
		if reg, err = LoadTools(cfg.Tools, cfg.WebhookSecret, cfg.Channels); err != nil {
			return err
		}
	}
	var gw *Gateway
	if cfg.Upstreams == nil {
		if gw, reg, err = StartGateway(ctx, reg, log); err != nil {
			if cfg.Registry != nil {
				return fmt.Errorf("tools: %w", err)
			}
			return fmt.Errorf("tools file %s: %w", cfg.Tools, err)
		}
		defer gw.Close() // a.serve returns once every call under way (executor or submission) is recorded
		if gw != nil {
			cfg.Upstreams = gw.Manager
		}
	}
	switch {
	case cfg.Registry != nil:
		log.Info("tools given", "sha256", reg.Hash, "tools", len(reg.Tools()))
	case cfg.Tools == "":
		log.Warn("no tools file (APPROVALS_TOOLS): every tool is treated as unregistered, at-most-once")
	default:
		log.Info("tools loaded", "file", cfg.Tools, "sha256", reg.Hash, "tools", len(reg.Tools()))
	}
	st := cfg.Store
	if st == nil {
		var where string
		if st, where, err = OpenStore(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		defer st.Close()
		log.Info("storage ready", "store", where)
	}
	var qs queue.Store = st
	if cfg.WrapQueue != nil {
		qs = cfg.WrapQueue(st)
	}
	if cfg.Notifiers == nil {
		cfg.Notifiers = func(svc *queue.Service, st storage.Store) (Notifiers, error) {
			return newNotifiers(cfg, svc, st, log)
		}
	}
	a, err := newApp(st, qs, reg, cfg)
	if err != nil {
		return err
	}
	if gw != nil {
		gw.Serve(a.Tools)
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
		// Opt-in profiling on its own listener, never on the public one;
		// it ends with Run.
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		srv := &http.Server{Addr: addr, Handler: mux}
		defer srv.Close()
		go func() {
			log.Info("pprof listening", "addr", addr)
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("pprof", "err", err)
			}
		}()
	}
	if cfg.Ready != nil {
		cfg.Ready(a)
	}
	return a.serve(ctx, ln)
}

// browsableAddr is addr as a browser can open it: a server listening on
// every interface (":8080" is "[::]:8080") is reached through localhost.
func browsableAddr(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return net.JoinHostPort("localhost", strconv.Itoa(tcp.Port))
	}
	return addr.String()
}
