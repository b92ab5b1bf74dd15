package queue

import (
	"context"
	"time"
)

// RunSweeper sweeps every interval until ctx ends. Several processes may
// sweep one database: expiry skips rows another sweeper holds, and the
// unique open-ticket index keeps stale tickets to one per action.
func (s *Service) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		res, err := s.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("sweep failed", "err", err)
		case len(res.Expired) > 0 || len(res.Tickets) > 0:
			s.log.Info("sweep", "expired", len(res.Expired), "tickets_opened", len(res.Tickets))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
