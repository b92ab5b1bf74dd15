package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/approvals/approvals/queue"
)

// Sweeper expires what is due, opens stale-claim tickets, and sends the
// reminders and escalations of the approval rules.
type Sweeper struct {
	svc   Service
	store queue.Store
	log   *slog.Logger
}

// NewSweeper returns the sweeper over store, on svc's clock; a nil log is
// slog.Default().
func NewSweeper(svc Service, store queue.Store, log *slog.Logger) *Sweeper {
	if log == nil {
		log = slog.Default()
	}
	return &Sweeper{svc: svc, store: store, log: log}
}

// Run sweeps every interval until ctx ends. Several processes may
// sweep one database: expiry skips rows another sweeper holds, and the
// unique open-ticket index keeps stale tickets to one per action.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		res, err := s.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("sweep failed", "err", err)
		case len(res.Expired) > 0 || len(res.PlansExpired) > 0 || len(res.Tickets) > 0 || res.Reminded > 0 || res.Escalated > 0 || res.Verified > 0:
			s.log.Info("sweep", "expired", len(res.Expired), "plans_expired", len(res.PlansExpired), "tickets_opened", len(res.Tickets),
				"reminded", res.Reminded, "escalated", res.Escalated, "verified", res.Verified)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SweepResult counts what one sweep did.
type SweepResult struct {
	Expired []*queue.Action
	// PlansExpired are the ids of the plans whose expiry this sweep
	// stored (queue.Store.PlanExpireDue).
	PlansExpired []string
	Tickets      []*queue.Ticket
	Reminded     int // pending actions and plans reminded of (approval.remind_after)
	Escalated    int // pending actions and plans escalated (approval.escalate_after)
	Verified     int // verifier rounds asked (tools' verify blocks)
}

// Verifying is a Service whose verifiers the sweep asks about open tickets
// (queue.Tickets.VerifyDue).
type Verifying interface {
	Tickets() queue.Tickets
}

// PlanRouting is a Service whose pending plans the sweep reminds of and
// escalates (queue.Plans.RouteDue), on their steps' schedules.
type PlanRouting interface {
	Plans() queue.Plans
}

// Sweep expires what is due (actions, then plans) and opens a stale ticket for every claim held
// longer than its tool's claim_timeout. It never releases a claim.
func (s *Sweeper) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	now := s.svc.Now()
	const batch = 500
	for {
		exp, err := s.store.ActionExpireDue(ctx, queue.ExpiryDue(now, batch))
		if err != nil {
			return res, err
		}
		res.Expired = append(res.Expired, exp...)
		if len(exp) < batch {
			break
		}
	}
	for {
		ids, err := s.store.PlanExpireDue(ctx, queue.PlanExpiryDue(now, batch))
		if err != nil {
			return res, err
		}
		res.PlansExpired = append(res.PlansExpired, ids...)
		if len(ids) < batch {
			break
		}
	}
	for {
		tk, err := s.store.TicketOpenStale(ctx, queue.StaleDue(now, batch))
		if err != nil {
			return res, err
		}
		res.Tickets = append(res.Tickets, tk...)
		if len(tk) < batch {
			break
		}
	}
	queue.TraceSwept(ctx, s.store, now, res.Expired, res.Tickets)
	// Escalate before reminding: an action due for both is told of its
	// escalation, and its reminder clock still runs.
	for {
		n, err := s.store.ActionEscalateDue(ctx, queue.EscalationDue(now, batch))
		if err != nil {
			return res, err
		}
		res.Escalated += n
		if n < batch {
			break
		}
	}
	for {
		n, err := s.store.ActionRemindDue(ctx, queue.ReminderDue(now, batch))
		if err != nil {
			return res, err
		}
		res.Reminded += n
		if n < batch {
			break
		}
	}
	if p, ok := s.svc.(PlanRouting); ok {
		r, e, err := p.Plans().RouteDue(ctx)
		res.Reminded += r
		res.Escalated += e
		if err != nil {
			return res, err
		}
	}
	// Last: the tickets opened above are asked about at once.
	if v, ok := s.svc.(Verifying); ok {
		n, err := v.Tickets().VerifyDue(ctx)
		res.Verified = n
		if err != nil {
			return res, err
		}
	}
	return res, nil
}
