package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/mcpserver"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/web"
)

// app is one assembled server process.
type app struct {
	server *web.Server
	svc    *queue.Service
	// dispatcher delivers approved actions of webhook tools; every process
	// runs one, and the claim decides which delivers each action.
	dispatcher *queue.Dispatcher
	accounts   accounts.Store
	log        *slog.Logger
}

func newApp(ctx context.Context, cfg config, svc *queue.Service, st store, metrics *web.Metrics, log *slog.Logger) (*app, error) {
	srv, err := web.New(web.Config{Service: svc, Accounts: st, Metrics: metrics, Logger: log,
		MaxBody: cfg.MaxBody, SessionSecret: cfg.SessionSecret,
		PublicURL: cfg.PublicURL, TrustedProxies: cfg.TrustedProxies, MetricsElsewhere: cfg.MetricsAddr != "",
		MCP: mcpserver.New(svc, st, log, cfg.MaxBody),
		// Live dashboard streams end when shutdown begins, so Shutdown
		// does not wait for open browser tabs.
		Done: svc.Stopping()})
	if err != nil {
		return nil, err
	}
	dc := queue.DispatcherConfig{
		// Each delivery is bounded by its tool's executor timeout; the
		// dispatcher never follows redirects.
		Client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		Secret: cfg.WebhookSecret,
		Logger: log,
	}
	if metrics != nil {
		dc.OnOutcome = func(outcome string) { metrics.Deliveries.WithLabelValues(outcome).Inc() }
	}
	d := queue.NewDispatcher(svc, dc)
	return &app{server: srv, svc: svc, dispatcher: d, accounts: st, log: log}, nil
}

// startWorkers starts the background workers besides the sweeper. When ctx
// ends they stop claiming; wg is done once the deliveries under way have
// finished.
func (a *app) startWorkers(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { a.dispatcher.Run(ctx) })
	wg.Go(func() { a.pruneAccounts(ctx, 10*time.Minute) })
}

// pruneAccounts deletes expired sessions and day-old login failures, so
// neither accumulates. (Anonymous visitors write no session rows: their
// CSRF token lives in a signed cookie.)
func (a *app) pruneAccounts(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		now := time.Now().UTC()
		if err := a.accounts.AccountsPrune(ctx, now, now.Add(-24*time.Hour)); err != nil && ctx.Err() == nil {
			a.log.Warn("prune sessions and login failures", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
