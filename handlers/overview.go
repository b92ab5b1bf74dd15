package handlers

import (
	"context"
	"sync"
	"time"

	"github.com/approvals/approvals/queue"
)

// OverviewMaxAge is how long an OverviewCache keeps an overview: its
// statements read a week's decisions (the chart only its last hour or two:
// queue.HourlyRollup), so however many people keep the page open, each
// process computes it at most once per this period.
const OverviewMaxAge = 15 * time.Second

// OverviewCache is the overview page's last overview in this process.
type OverviewCache struct {
	mu sync.Mutex // held while computing: concurrent views wait for one computation
	o  *queue.Overview
	// hours keeps the chart's settled hours, so a computation reads only
	// the last hour or two of submissions and decisions, not the day's.
	hours queue.HourlyRollup
}

// Get is queue.ReadOverview at now, read again only when the last one is
// OverviewMaxAge old (by the clock now comes from); Overview.Now says when
// it was computed.
func (c *OverviewCache) Get(ctx context.Context, r queue.Reader, now time.Time) (*queue.Overview, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.o != nil && !now.Before(c.o.Now) && now.Sub(c.o.Now) < OverviewMaxAge {
		return c.o, nil
	}
	o, err := queue.ReadOverview(ctx, r, now, &c.hours)
	if err != nil {
		return nil, err
	}
	c.o = o
	return o, nil
}
