package web

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// Metrics are the Prometheus metrics of one server. Each server has its own
// registry, so several servers can run in one test process.
type Metrics struct {
	Registry      *prometheus.Registry
	submissions   *prometheus.CounterVec
	Deliveries    *prometheus.CounterVec
	notifications *prometheus.CounterVec
	policy        *prometheus.CounterVec
	verifications *prometheus.CounterVec
	ticketsDone   *prometheus.CounterVec
}

// Counts is the store the metrics read actions by state and open tickets
// from at scrape time (NewMetrics is always given the store, never the
// Service). When the store also counts pending notifications
// (NotificationCountPending), unsealed events (AuditUnsealedCount) or its
// batches (queue.BatchStatser), those are reported too.
type Counts interface {
	ActionCountByState(ctx context.Context) (map[queue.State]int64, error)
	TicketCountOpen(ctx context.Context) (int64, error)
}

// CountsMaxAge is how long the per-state counts of /metrics are kept: they
// are a scan of the actions table, so however often /metrics is scraped
// (by several Prometheus servers, or by anyone when it is public) the
// database counts at most once per this period and process.
const CountsMaxAge = 15 * time.Second

// MetricsOption tunes NewMetrics.
type MetricsOption func(*storeCollector)

// MetricsClock sets the clock that ages the cached counts (tests).
func MetricsClock(now func() time.Time) MetricsOption {
	return func(c *storeCollector) { c.now = now }
}

// NewMetrics registers the metrics; actions by state and open tickets are
// read from the store at scrape time, at most once per CountsMaxAge.
func NewMetrics(store Counts, opts ...MetricsOption) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	sc := &storeCollector{store: store, now: time.Now}
	for _, o := range opts {
		o(sc)
	}
	m.submissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "approvals_submissions_total",
		Help: "Action submissions by tool class and outcome (created, replayed, or the refusal code).",
	}, []string{"class", "outcome"})
	m.Deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "approvals_webhook_deliveries_total",
		Help: "Webhook deliveries by outcome (done, failed, unknown).",
	}, []string{"outcome"})
	m.notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "approvals_notifications_total",
		Help: "Notification attempts by channel kind (slack, email, webhook) and outcome (delivered, retry, failed: given up).",
	}, []string{"channel", "outcome"})
	m.policy = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "approvals_policy_decisions_total",
		Help: "Decisions made at submission, by tool, policy rule and decision (approve, reject, human), and the approvals of grants (rule \"\", decision grant).",
	}, []string{"tool", "rule", "decision"})
	m.verifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "approvals_verifications_total",
		Help: "Checks of tools' verifiers (asking the system of record), by tool and verdict (done, not_done, unknown).",
	}, []string{"tool", "verdict"})
	m.ticketsDone = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "approvals_tickets_resolved_total",
		Help: "Reconciliation tickets resolved, by who resolved them (verifier: its proof; operator: a person; agent: the action's late report), counted once each when the resolution commits.",
	}, []string{"by"})
	for _, by := range []string{queue.ResolvedByVerifier, queue.ResolvedByOperator, queue.ResolvedByAgent} {
		m.ticketsDone.WithLabelValues(by)
	}
	m.Registry.MustRegister(m.submissions, m.Deliveries, m.notifications, m.policy, m.verifications, m.ticketsDone, sc,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// OnSubmit counts one submission; pass it as queue.Options.OnSubmit.
func (m *Metrics) OnSubmit(class classify.Class, outcome string) {
	m.submissions.WithLabelValues(string(class), outcome).Inc()
}

// OnPolicy counts one decision made at submission; pass it as
// queue.Options.OnPolicy.
func (m *Metrics) OnPolicy(tool, rule, decision string) {
	m.policy.WithLabelValues(tool, rule, decision).Inc()
}

// OnVerified counts one verifier check; pass it as queue.Options.OnVerified.
func (m *Metrics) OnVerified(tool, verdict string) {
	m.verifications.WithLabelValues(tool, verdict).Inc()
}

// OnTicketResolved counts one ticket resolution; pass it as
// queue.Options.OnTicketResolved.
func (m *Metrics) OnTicketResolved(by string) {
	m.ticketsDone.WithLabelValues(by).Inc()
}

// OnNotification counts one notification attempt; pass it as
// maintenance.OutboxConfig.OnNotification.
func (m *Metrics) OnNotification(channelKind, outcome string) {
	m.notifications.WithLabelValues(channelKind, outcome).Inc()
}

// notificationDepth is what a store offers for the outbox's queue depth.
type notificationDepth interface {
	NotificationCountPending(ctx context.Context) (int64, error)
}

// auditBacklog is what a store offers for the audit chain's backlog.
type auditBacklog interface {
	AuditUnsealedCount(ctx context.Context) (int64, error)
}

var (
	unsealedDesc = prometheus.NewDesc("approvals_audit_unsealed",
		"Events waiting for the audit sealer to give them a seq and a hash.", nil, nil)
	queuedDesc = prometheus.NewDesc("approvals_notifications_queued",
		"Notifications not yet delivered nor given up (the outbox's queue depth).", nil, nil)
	actionsDesc = prometheus.NewDesc("approvals_actions", "Stored actions by state.", []string{"state"}, nil)
	ticketsDesc = prometheus.NewDesc("approvals_tickets_open", "Open reconciliation tickets.", nil, nil)
)

var (
	batchesDesc = prometheus.NewDesc("approvals_store_batches_total",
		"Batches of hot statements sent to PostgreSQL, or write transactions committed by SQLite's writer, reruns included, by batching queue (calls / batches is the queue's mean batch size; on SQLite, calls per commit).", []string{"queue"}, nil)
	batchCallsDesc = prometheus.NewDesc("approvals_store_batched_calls_total",
		"Calls of requests carried by those batches (on SQLite, by the committed transactions), by batching queue.", []string{"queue"}, nil)
	batchesRefusedDesc = prometheus.NewDesc("approvals_store_batches_refused_total",
		"Batches that failed as a whole (on SQLite, after their calls ran), by batching queue; their calls ran again one by one.", []string{"queue"}, nil)
	lookupsDesc = prometheus.NewDesc("approvals_replay_lookups_total",
		"Resubmissions of keys this process saw held, by whether the lookup found the holder (found) or the claim ran (missed); PostgreSQL only; absent on SQLite.",
		[]string{"result"}, nil)
)

type storeCollector struct {
	store Counts
	now   func() time.Time

	// mu is held across the count, so that concurrent scrapes of a stale
	// cache wait for one query instead of each running their own.
	mu       sync.Mutex
	countsAt time.Time // zero: never counted
	counts   map[queue.State]int64
	tickets  int64
	ticketOK bool
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- actionsDesc
	ch <- ticketsDesc
	if _, ok := c.store.(notificationDepth); ok {
		ch <- queuedDesc
	}
	if _, ok := c.store.(auditBacklog); ok {
		ch <- unsealedDesc
	}
	if _, ok := c.store.(queue.BatchStatser); ok {
		ch <- batchesDesc
		ch <- batchCallsDesc
		ch <- batchesRefusedDesc
		ch <- lookupsDesc
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	if bs, ok := c.store.(queue.BatchStatser); ok {
		st := bs.BatchStats()
		for _, q := range st.Queues {
			ch <- prometheus.MustNewConstMetric(batchesDesc, prometheus.CounterValue, float64(q.Batches), q.Name)
			ch <- prometheus.MustNewConstMetric(batchCallsDesc, prometheus.CounterValue, float64(q.Calls), q.Name)
			ch <- prometheus.MustNewConstMetric(batchesRefusedDesc, prometheus.CounterValue, float64(q.Refused), q.Name)
		}
		if st.Lookups {
			ch <- prometheus.MustNewConstMetric(lookupsDesc, prometheus.CounterValue, float64(st.LookupsFound), "found")
			ch <- prometheus.MustNewConstMetric(lookupsDesc, prometheus.CounterValue, float64(st.LookupsMissed), "missed")
		}
	}
	counts, tickets, ticketOK := c.cachedCounts()
	if counts != nil {
		for _, st := range queue.States {
			ch <- prometheus.MustNewConstMetric(actionsDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
		}
	}
	if ticketOK {
		ch <- prometheus.MustNewConstMetric(ticketsDesc, prometheus.GaugeValue, float64(tickets))
	}
	if queued, ok := c.queued(); ok {
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(queued))
	}
	if unsealed, ok := c.unsealed(); ok {
		ch <- prometheus.MustNewConstMetric(unsealedDesc, prometheus.GaugeValue, float64(unsealed))
	}
}

// unsealed returns the audit chain's backlog when the store has one. Like
// the outbox depth it is read at every scrape: it counts a range of an
// index past the sealer's cursor, which stays short while the sealer runs.
func (c *storeCollector) unsealed() (int64, bool) {
	b, ok := c.store.(auditBacklog)
	if !ok {
		return 0, false
	}
	return countNow(b.AuditUnsealedCount)
}

// queued returns the outbox depth when the store counts it. It is not
// cached like the per-state counts: it reads a small partial index, and an
// operator watching a channel recover wants it current.
func (c *storeCollector) queued() (int64, bool) {
	d, ok := c.store.(notificationDepth)
	if !ok {
		return 0, false
	}
	return countNow(d.NotificationCountPending)
}

// countNow runs one count of a scrape, bounded; false when it failed (the
// series is then left out of the scrape).
func countNow(count func(context.Context) (int64, error)) (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := count(ctx)
	return n, err == nil
}

// cachedCounts returns the counts, read again when older than
// CountsMaxAge. A failed count is not cached: the next scrape tries again.
func (c *storeCollector) cachedCounts() (map[queue.State]int64, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.countsAt.IsZero() && now.Sub(c.countsAt) < CountsMaxAge && now.Sub(c.countsAt) >= 0 {
		return c.counts, c.tickets, c.ticketOK
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.store.ActionCountByState(ctx)
	if err != nil {
		return nil, 0, false
	}
	tickets, err := c.store.TicketCountOpen(ctx)
	c.counts, c.tickets, c.ticketOK = counts, tickets, err == nil
	if err == nil {
		c.countsAt = now
	}
	return c.counts, c.tickets, c.ticketOK
}
