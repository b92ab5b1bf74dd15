package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
)

// OutboxConfig configures the sender.
type OutboxConfig struct {
	// Notifiers deliver by channel kind (classify.KindSlack, …). A kind
	// without a notifier in this process is retried with backoff: another
	// process may have it, or a restart with the setting.
	Notifiers map[string]queue.Notifier
	// Lease is how long a claimed notification stays with its sender
	// before another may take it; one delivery is given half of it.
	// Default 1 minute.
	Lease time.Duration
	// Poll paces the fan-out and the sender when nothing wakes them
	// sooner. Default 1 second.
	Poll time.Duration
	// Wake, when set, wakes the outbox at once: a signal that this process
	// committed events a channel may hear of which no state change
	// announces (a new action: queue.Options.OnEvents). A state change
	// made by any process sharing the database (store.Subscribe) wakes it
	// too, so a decision reaches Slack, email or a webhook without waiting
	// for the poll; a submission in another process waits for the poll.
	Wake <-chan struct{}
	// MinGap is the least time between two rounds, so that a stream of
	// wake-ups under load costs one round per gap. Default 20ms.
	MinGap time.Duration
	// Backoff is the first retry delay, doubled per attempt up to
	// BackoffCap. Defaults 5 seconds and 5 minutes.
	Backoff, BackoffCap time.Duration
	// GiveUpAfter ends the retries this long after the notification was
	// created. Default 24 hours.
	GiveUpAfter time.Duration
	// Batch is how many events or notifications one step takes. Default 100.
	Batch int
	// Logger, default slog.Default().
	Logger *slog.Logger
	// OnNotification observes every notification attempt's channel kind
	// and outcome (delivered, retry, failed), for metrics.
	OnNotification func(channelKind, outcome string)
}

func (c *OutboxConfig) defaults() {
	if c.Lease <= 0 {
		c.Lease = time.Minute
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.MinGap <= 0 {
		c.MinGap = 20 * time.Millisecond
	}
	if c.Backoff <= 0 {
		c.Backoff = 5 * time.Second
	}
	if c.BackoffCap <= 0 {
		c.BackoffCap = 5 * time.Minute
	}
	if c.GiveUpAfter <= 0 {
		c.GiveUpAfter = 24 * time.Hour
	}
	if c.Batch <= 0 {
		c.Batch = 100
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Outbox fans the outbox's events out into notifications and sends them.
// Every transition already writes an event row in its own transaction; the
// event kinds queue.NotifyingEventKinds are the ones that notify, so such a
// row is the outbox entry: it cannot be lost once the change committed, and
// it costs the transition nothing more than the row it wrote anyway. The
// fan-out turns each of them into one notification row per channel, in one
// transaction; the sender delivers those rows at least once, with retries.
type Outbox struct {
	svc   Service
	store queue.Store
	cfg   OutboxConfig
	// failing marks the notification channels whose last attempt failed,
	// so the log speaks once per failure streak.
	failing struct {
		sync.Mutex
		m map[string]bool
	}
}

// NewOutbox returns the fan-out and sender over store, beside svc.
func NewOutbox(svc Service, store queue.Store, cfg OutboxConfig) *Outbox {
	cfg.defaults()
	return &Outbox{svc: svc, store: store, cfg: cfg}
}

// Run fans out and sends until ctx ends: at once when woken (Wake, or a
// state change in any process while the tools file has channels), else
// every Poll, and never two rounds within MinGap. Any number of processes
// may run it on one database.
func (o *Outbox) Run(ctx context.Context) {
	t := time.NewTicker(o.cfg.Poll)
	defer t.Stop()
	sub := o.store.Subscribe()
	defer sub.Cancel()
	changes := sub.Changes
	for {
		started := time.Now()
		if _, err := o.FanOut(ctx, o.cfg.Batch); err != nil && ctx.Err() == nil {
			o.cfg.Logger.Warn("notification fan-out failed", "err", err)
		}
		if _, err := o.SendDue(ctx); err != nil && ctx.Err() == nil {
			o.cfg.Logger.Warn("notification sender failed", "err", err)
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				break wait
			case <-o.cfg.Wake:
				break wait
			case _, ok := <-changes:
				if !ok {
					changes = nil // the hub closed: the poll goes on
					continue
				}
				// Without a channel no change notifies anyone: the claim
				// cycles of a file without channels pay no rounds for them.
				if o.svc.Registry().HasChannels() {
					break wait
				}
			}
		}
		if gap := o.cfg.MinGap - time.Since(started); gap > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(gap):
			}
		}
	}
}

// FanOut turns events waiting in the outbox into notifications, one per
// channel that hears of the event (classify.Registry.ChannelsFor, judged
// on the action's tool snapshot, with the current file's channels) and,
// for a decision or a ticket's resolution, one per channel that told of
// the action (route).
func (o *Outbox) FanOut(ctx context.Context, limit int) (int, error) {
	reg := o.svc.Registry()
	now := o.svc.Now()
	total := 0
	for {
		n, err := o.store.NotificationFanOut(ctx, queue.NotificationFanOutParams{Now: now, Limit: limit,
			Route: func(ev queue.Event, a *queue.Action, sent []queue.ChannelMessage) []queue.NotificationRecord {
				typ := queue.NotificationType(ev, a)
				if typ == "" {
					return nil
				}
				var out []queue.NotificationRecord
				for _, c := range route(reg, typ, ev, a, sent) {
					out = append(out, queue.NotificationRecord{ID: queue.NewID(now), EventID: ev.ID, ActionID: a.ID, Type: typ,
						Channel: c.Name, Kind: c.Kind(), State: queue.NotificationPending, CreatedAt: now, DueAt: now})
				}
				return out
			},
			RoutePlan: func(ev queue.Event, pl *queue.Plan, sent []queue.ChannelMessage) []queue.NotificationRecord {
				typ := queue.PlanNotificationType(ev)
				if typ == "" {
					return nil
				}
				var out []queue.NotificationRecord
				for _, c := range routePlan(reg, typ, pl, sent) {
					out = append(out, queue.NotificationRecord{ID: queue.NewID(now), EventID: ev.ID, PlanID: pl.ID, Type: typ,
						Channel: c.Name, Kind: c.Kind(), State: queue.NotificationPending, CreatedAt: now, DueAt: now})
				}
				return out
			}})
		total += n
		if err != nil || n < limit {
			return total, err
		}
	}
}

// route is the channels a notification of type typ goes to: those that
// hear of it by the tools file, and for a type that follows up
// (classify.FollowsUp) those that sent a message for the action it
// recorded, so that a Slack or Telegram message posted on escalation loses
// its buttons and a PagerDuty incident is resolved, whichever list named
// the channel. A ticket's resolution follows up only on the messages about
// that ticket.
func route(reg *classify.Registry, typ string, ev queue.Event, a *queue.Action, sent []queue.ChannelMessage) []classify.Channel {
	out := reg.ChannelsFor(typ, a.Spec)
	if !classify.FollowsUp(typ) || len(sent) == 0 {
		return out
	}
	ticket := ""
	if typ == classify.EventTicketResolved {
		if ticket = eventTicket(ev.Data); ticket == "" {
			return out
		}
	}
	for _, c := range reg.Channels() {
		if slices.ContainsFunc(out, func(o classify.Channel) bool { return o.Name == c.Name }) {
			continue
		}
		if slices.ContainsFunc(sent, func(m queue.ChannelMessage) bool {
			return m.Kind == c.Kind() && m.Address == c.Address() && (ticket == "" || m.Ref == ticket)
		}) {
			out = append(out, c)
		}
	}
	return out
}

// PlanKinds are the channel kinds that tell of plans: a plan's message
// lists every step. PagerDuty channels are not sent plans' events
// (docs/plans.md).
var PlanKinds = []string{classify.KindSlack, classify.KindEmail, classify.KindWebhook, classify.KindTeams, classify.KindTelegram}

// routePlan is route for a plan's notification: the channels its human
// steps' rules name (queue.PlanChannels) and, for a decision, those that
// sent a message for the plan, of the kinds that tell of plans.
func routePlan(reg *classify.Registry, typ string, pl *queue.Plan, sent []queue.ChannelMessage) []classify.Channel {
	var out []classify.Channel
	for _, c := range queue.PlanChannels(reg, typ, pl) {
		if slices.Contains(PlanKinds, c.Kind()) {
			out = append(out, c)
		}
	}
	if !classify.FollowsUp(typ) {
		return out
	}
	for _, c := range reg.Channels() {
		if slices.ContainsFunc(out, func(o classify.Channel) bool { return o.Name == c.Name }) || !slices.Contains(PlanKinds, c.Kind()) {
			continue
		}
		if slices.ContainsFunc(sent, func(m queue.ChannelMessage) bool { return m.Kind == c.Kind() && m.Address == c.Address() }) {
			out = append(out, c)
		}
	}
	return out
}

// eventTicket is the ticket a ticket event's data names.
func eventTicket(data json.RawMessage) string {
	var d struct {
		Ticket string `json:"ticket"`
	}
	if json.Unmarshal(data, &d) != nil {
		return ""
	}
	return d.Ticket
}

// SendDue claims the notifications that are due and delivers each through
// its kind's Notifier, then records delivery, the next retry, or the end
// of the retries. It returns how many it claimed.
func (o *Outbox) SendDue(ctx context.Context) (int, error) {
	cfg := o.cfg
	now := o.svc.Now()
	due, err := o.store.NotificationClaim(ctx, queue.NotificationClaimParams{Now: now, Lease: cfg.Lease, Limit: cfg.Batch})
	if err != nil {
		return 0, err
	}
	for _, r := range due {
		if ctx.Err() != nil {
			// Shutting down: the send under way has finished; the lease
			// hands the rest of the batch to the next sender.
			return len(due), ctx.Err()
		}
		if o.svc.Now().Sub(now) >= cfg.Lease/2 {
			// A send may take half the lease: one started later could
			// outlive the lease while another process, seeing it expired,
			// sends the same notification. The rest of the batch comes due
			// again when the lease ends.
			return len(due), nil
		}
		if err := o.send(context.WithoutCancel(ctx), r); err != nil {
			return len(due), err
		}
	}
	return len(due), nil
}

// send delivers one notification and settles it. Its context is not the
// sender's: a send under way when shutdown begins runs to its end (bounded
// by half the lease), so that its outcome is recorded rather than left to
// be repeated after the lease.
func (o *Outbox) send(ctx context.Context, r queue.NotificationRecord) error {
	cfg := o.cfg
	err := o.deliver(ctx, r)
	now := o.svc.Now()
	p := queue.NotificationSettleParams{ID: r.ID, Attempts: r.Attempts, Now: now, State: queue.NotificationDelivered}
	outcome := "delivered"
	if err != nil {
		p.LastError = err.Error()
		delay := min(cfg.Backoff<<min(r.Attempts-1, 20), cfg.BackoffCap)
		if ra, ok := errors.AsType[*queue.RetryAfterError](err); ok && ra.After > 0 {
			delay = ra.After
		}
		end := r.CreatedAt.Add(cfg.GiveUpAfter)
		switch {
		case !now.Before(end):
			p.State, outcome = queue.NotificationFailed, "failed"
		default:
			p.State, outcome = queue.NotificationPending, "retry"
			p.DueAt = now.Add(delay)
			if p.DueAt.After(end) {
				p.DueAt = end // one last try when the 24 hours end
			}
		}
	}
	if _, err := o.store.NotificationSettle(ctx, p); err != nil {
		return fmt.Errorf("settle notification %s: %w", r.ID, err)
	}
	o.streak(r, outcome, p.LastError)
	if cfg.OnNotification != nil {
		cfg.OnNotification(r.Kind, outcome)
	}
	return nil
}

// deliver builds the notification as it is now and hands it to the
// channel kind's notifier.
func (o *Outbox) deliver(ctx context.Context, r queue.NotificationRecord) error {
	ch, ok := o.svc.Registry().Channel(r.Channel)
	if !ok {
		return fmt.Errorf("channel %q is no longer in the tools file", r.Channel)
	}
	n, ok := o.cfg.Notifiers[ch.Kind()]
	if !ok {
		return fmt.Errorf("no %s notifier is configured in this process", ch.Kind())
	}
	if r.PlanID != "" {
		pl, err := o.store.PlanGetByID(ctx, r.PlanID)
		if err != nil {
			return fmt.Errorf("read plan %s: %w", r.PlanID, err)
		}
		pl.Settle(o.svc.Now())
		dctx, cancel := context.WithTimeout(ctx, o.cfg.Lease/2)
		defer cancel()
		return n.Notify(dctx, queue.Notification{ID: r.ID, Type: r.Type, Channel: ch, Plan: pl,
			PlanSteps: pl.StepActions(o.svc.Registry()), OccurredAt: r.EventAt, Attempt: r.Attempts})
	}
	a, err := o.store.ActionGetByID(ctx, r.ActionID)
	if err != nil {
		return fmt.Errorf("read action %s: %w", r.ActionID, err)
	}
	note := queue.Notification{ID: r.ID, Type: r.Type, Channel: ch, Action: a, OccurredAt: r.EventAt, Attempt: r.Attempts}
	if r.Type == classify.EventTicketOpened || r.Type == classify.EventTicketResolved {
		if id := eventTicket(r.EventData); id != "" {
			if note.Ticket, err = o.store.TicketGetByID(ctx, id); err != nil {
				return fmt.Errorf("read ticket %s: %w", id, err)
			}
		}
	}
	dctx, cancel := context.WithTimeout(ctx, o.cfg.Lease/2)
	defer cancel()
	if !tracing.Enabled() {
		return n.Notify(dctx, note)
	}
	// The message is a span of the action's trace, and the channel's HTTP
	// requests (its API calls, a webhook) carry its traceparent.
	dctx, span := tracing.Start(trace.ContextWithSpan(dctx, trace.SpanFromContext(queue.SubmissionTraceContext(ctx, o.store, a.ID))),
		"approvals.notify", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("approvals.action.id", a.ID), attribute.String("gen_ai.tool.name", a.Tool),
			attribute.String("approvals.channel.kind", ch.Kind()), attribute.String("approvals.notification.type", r.Type),
			attribute.Int("approvals.notification.attempt", r.Attempts)))
	err = n.Notify(dctx, note)
	if err != nil {
		span.SetStatus(codes.Error, "")
	}
	span.End()
	return err
}

func (o *Outbox) streak(r queue.NotificationRecord, outcome, lastErr string) {
	o.failing.Lock()
	defer o.failing.Unlock()
	if o.failing.m == nil {
		o.failing.m = map[string]bool{}
	}
	m := o.failing.m
	log := o.cfg.Logger
	was := m[r.Channel]
	switch outcome {
	case "delivered":
		if was {
			log.Info("notification channel recovered", "channel", r.Channel, "kind", r.Kind)
		}
		delete(m, r.Channel)
	case "retry":
		if !was {
			log.Warn("notification channel failing; retrying with backoff", "channel", r.Channel, "kind", r.Kind, "notification", r.ID, "err", lastErr)
		}
		m[r.Channel] = true
	case "failed":
		// Giving up is logged every time: it is the one loss an operator
		// must hear of.
		log.Error("notification given up after retries", "channel", r.Channel, "kind", r.Kind, "notification", r.ID, "action", r.ActionID, "type", r.Type, "err", lastErr)
		m[r.Channel] = true
	}
}
