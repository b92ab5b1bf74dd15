package queue

import (
	"context"
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
	// Hours has exactly OverviewHours buckets, oldest first, the last one
	// the current (partial) hour.
	Hours []HourCount
}

// ReadOverview summarises the queue at now.
func ReadOverview(ctx context.Context, st Reader, now time.Time) (*Overview, error) {
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
	first := now.Truncate(time.Hour).Add(-(OverviewHours - 1) * time.Hour)
	counted, err := st.ActionHourly(ctx, PeriodParams{Since: first, Until: now})
	if err != nil {
		return nil, err
	}
	o.Hours = fillHours(first, counted)
	return o, nil
}

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
