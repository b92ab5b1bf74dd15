package queue

import (
	"context"
	"sync"
	"time"
)

// The overview's windows.
const (
	// OverviewDecisionWindow is how far back "decisions" and the chart look.
	OverviewDecisionWindow = 24 * time.Hour
	// OverviewTimingWindow is how far back time to decision is measured.
	OverviewTimingWindow = 7 * 24 * time.Hour
	// OverviewHours is the number of hourly buckets of the chart: the
	// current hour and the 23 before it.
	OverviewHours = 24
	// HourSettle is how long after its end an hour of the chart may still
	// change: a submission or a decision carries its process's clock from
	// before its commit, so a row may land in an hour that has just ended.
	// An HourlyRollup reads an hour again until it ended this long ago, and
	// keeps its counts from then on.
	HourSettle = 15 * time.Minute
)

// OverviewStore is the part of Store that summarises the queue for
// GET /overview. Every count is a decision by a person (decided_by
// "user:…"): an expiry or an agent's cancel is not one.
type OverviewStore interface {
	// ActionPendingByTool counts pending actions per tool, with the oldest
	// one's created_at, in tool order.
	ActionPendingByTool(ctx context.Context) ([]ToolPending, error)
	// ActionDecisionCount counts decisions with Since < decided_at <= Until.
	ActionDecisionCount(ctx context.Context, p PeriodParams) (int64, error)
	// ActionDecisionTimes gives per tool, in tool order, the number of
	// decisions with Since < decided_at <= Until and the nearest-rank 50th
	// and 90th percentiles of decided_at - created_at: the value at rank
	// ceil(n/2) and ceil(9n/10) of the sorted durations. SQLite measures
	// to the millisecond.
	ActionDecisionTimes(ctx context.Context, p PeriodParams) ([]ToolDecisionTimes, error)
	// ActionHourly counts submissions (created_at) and decisions
	// (decided_at) with Since <= t <= Until per UTC hour, in hour order,
	// leaving out hours with neither.
	ActionHourly(ctx context.Context, p PeriodParams) ([]HourCount, error)
	// TicketResolutionStats counts the tickets resolved with Since <
	// resolved_at <= Until by a verifier (resolved_by "verifier:…") and by
	// a person ("user:…"), with the nearest-rank 50th and 90th percentiles
	// of resolved_at - opened_at of a person's: how long a ticket waited
	// for a person (0 when none). Served by the index tickets_resolved.
	TicketResolutionStats(ctx context.Context, p PeriodParams) (TicketResolutions, error)
}

// TicketResolutions is how a window's tickets were settled: by verifiers
// asking the system of record, or by a person, and how long the person's
// waited from the ticket's opening.
type TicketResolutions struct {
	ByVerifier, ByPerson int64
	WaitP50, WaitP90     time.Duration
}

// PeriodParams are the bounds of an overview statement; each method says
// which bound it includes.
type PeriodParams struct {
	Since, Until time.Time
}

// ToolPending is one tool's share of the queue.
type ToolPending struct {
	Tool    string
	Pending int64
	Oldest  time.Time
}

// ToolDecisionTimes is how long one tool's actions waited for a person.
type ToolDecisionTimes struct {
	Tool      string
	Decisions int64
	P50, P90  time.Duration
}

// HourCount is one hour of the chart.
type HourCount struct {
	Hour      time.Time // the start of the hour, UTC
	Submitted int64
	Decided   int64
}

// Overview is the health of the queue at Now.
type Overview struct {
	Now     time.Time
	Pending []ToolPending
	// PendingTotal and OldestPending sum Pending up; OldestPending is nil
	// when nothing is pending.
	PendingTotal  int64
	OldestPending *time.Time
	Decisions24h  int64
	DecisionTimes []ToolDecisionTimes
	OpenTickets   int64
	// Tickets24h and Tickets7d are the tickets resolved in the last
	// OverviewDecisionWindow and OverviewTimingWindow.
	Tickets24h, Tickets7d TicketResolutions
	// Hours has exactly OverviewHours buckets, oldest first, the last one
	// the current (partial) hour.
	Hours []HourCount
}

// ReadOverview summarises the queue at now. With rollup, the chart reads
// only the hours rollup does not hold settled (HourlyRollup); with nil,
// every hour.
func ReadOverview(ctx context.Context, st Reader, now time.Time, rollup *HourlyRollup) (*Overview, error) {
	o := &Overview{Now: now}
	var err error
	if o.Pending, err = st.ActionPendingByTool(ctx); err != nil {
		return nil, err
	}
	for _, p := range o.Pending {
		o.PendingTotal += p.Pending
		if o.OldestPending == nil || p.Oldest.Before(*o.OldestPending) {
			oldest := p.Oldest
			o.OldestPending = &oldest
		}
	}
	if o.Decisions24h, err = st.ActionDecisionCount(ctx, PeriodParams{Since: now.Add(-OverviewDecisionWindow), Until: now}); err != nil {
		return nil, err
	}
	if o.DecisionTimes, err = st.ActionDecisionTimes(ctx, PeriodParams{Since: now.Add(-OverviewTimingWindow), Until: now}); err != nil {
		return nil, err
	}
	if o.OpenTickets, err = st.TicketCountOpen(ctx); err != nil {
		return nil, err
	}
	if o.Tickets24h, err = st.TicketResolutionStats(ctx, PeriodParams{Since: now.Add(-OverviewDecisionWindow), Until: now}); err != nil {
		return nil, err
	}
	if o.Tickets7d, err = st.TicketResolutionStats(ctx, PeriodParams{Since: now.Add(-OverviewTimingWindow), Until: now}); err != nil {
		return nil, err
	}
	if rollup == nil {
		rollup = new(HourlyRollup)
	}
	if o.Hours, err = rollup.hours(ctx, st, now); err != nil {
		return nil, err
	}
	return o, nil
}

// HourlyRollup keeps the counts of the chart's settled hours (those that
// ended HourSettle ago or more), so that each overview reads from the
// store only the hours that may still change: at most the current hour
// and the one before it, a few thousand rows at most, where the whole day
// is every submission and decision of 24 hours. The zero value is ready to
// use; it is safe for concurrent use.
type HourlyRollup struct {
	mu      sync.Mutex
	settled map[time.Time]HourCount // by the hour's start, UTC
}

// hours returns the chart's OverviewHours buckets at now.
func (r *HourlyRollup) hours(ctx context.Context, st OverviewStore, now time.Time) ([]HourCount, error) {
	first := now.Truncate(time.Hour).Add(-(OverviewHours - 1) * time.Hour)
	r.mu.Lock()
	defer r.mu.Unlock()
	// Forget what is out of the window or, by a clock that went back, not
	// settled at now.
	for h := range r.settled {
		if h.Before(first) || !hourSettled(h, now) {
			delete(r.settled, h)
		}
	}
	// Read from the first hour not held; the held ones are settled, so
	// they lie before every hour that is not.
	from := first
	for _, ok := r.settled[from]; ok; _, ok = r.settled[from] {
		from = from.Add(time.Hour)
	}
	counted, err := st.ActionHourly(ctx, PeriodParams{Since: from, Until: now})
	if err != nil {
		return nil, err
	}
	if r.settled == nil {
		r.settled = make(map[time.Time]HourCount, OverviewHours)
	}
	for h := from; hourSettled(h, now); h = h.Add(time.Hour) {
		r.settled[h] = HourCount{Hour: h} // an hour the store left out had nothing
	}
	for _, c := range counted {
		if _, ok := r.settled[c.Hour]; ok {
			r.settled[c.Hour] = c
		}
	}
	for h := first; h.Before(from); h = h.Add(time.Hour) {
		counted = append(counted, r.settled[h])
	}
	return fillHours(first, counted), nil
}

// hourSettled reports whether the hour starting at h can no longer change
// at now.
func hourSettled(h, now time.Time) bool { return !h.Add(time.Hour + HourSettle).After(now) }

// fillHours lays counted onto OverviewHours buckets from first, with zeros
// for the hours the store left out.
func fillHours(first time.Time, counted []HourCount) []HourCount {
	out := make([]HourCount, OverviewHours)
	for i := range out {
		out[i].Hour = first.Add(time.Duration(i) * time.Hour)
	}
	for _, c := range counted {
		i := int(c.Hour.Sub(first) / time.Hour)
		if i >= 0 && i < len(out) && c.Hour.Equal(out[i].Hour) {
			out[i].Submitted += c.Submitted
			out[i].Decided += c.Decided
		}
	}
	return out
}
