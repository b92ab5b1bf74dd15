package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/executor"
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
	dispatcher *executor.Webhook
	accounts   accounts.Store
	// notify delivers the outbox's notifications; every process runs a
	// sender, and the lease on each notification decides which sends it.
	notify      notifiers
	outboxLease time.Duration
	log         *slog.Logger
}

func newApp(ctx context.Context, cfg config, svc *queue.Service, st store, metrics *web.Metrics, log *slog.Logger, notify notifiers) (*app, error) {
	wc := web.Config{Service: svc, Accounts: st, Metrics: metrics, Logger: log,
		MaxBody: cfg.MaxBody, SessionSecret: cfg.SessionSecret,
		MCP: mcpserver.New(svc, st, log, cfg.MaxBody),
		// Live dashboard streams end when shutdown begins, so Shutdown
		// does not wait for open browser tabs.
		Done: svc.Stopping()}
	if notify.interactions != nil {
		wc.SlackInteractions = notify.interactions
	}
	srv, err := web.New(wc)
	if err != nil {
		return nil, err
	}
	dc := executor.WebhookConfig{
		// Each delivery is bounded by its tool's executor timeout; the
		// dispatcher never follows redirects.
		Client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		Secret: cfg.WebhookSecret,
		Logger: log,
	}
	if metrics != nil {
		dc.OnOutcome = func(outcome string) { metrics.Deliveries.WithLabelValues(outcome).Inc() }
	}
	d, err := executor.NewWebhook(svc, dc)
	if err != nil {
		return nil, err
	}
	return &app{server: srv, svc: svc, dispatcher: d, accounts: st, notify: notify, outboxLease: cfg.OutboxLease, log: log}, nil
}

// startWorkers starts the background workers besides the sweeper. When ctx
// ends they stop claiming; wg is done once the deliveries under way have
// finished.
func (a *app) startWorkers(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { a.dispatcher.Run(ctx) })
	wg.Go(func() { a.svc.RunOutbox(ctx, queue.OutboxConfig{Notifiers: a.notify.byKind, Lease: a.outboxLease}) })
	wg.Go(func() { a.pruneAccounts(ctx, 10*time.Minute) })
}

// pruneAccounts deletes expired sessions and day-old login failures, so an
// anonymous visitor's pre-login session rows do not accumulate.
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
