package maintenance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/approvals/approvals/audit"
)

// SealerConfig tunes a Sealer; zero values are the defaults.
type SealerConfig struct {
	// Holder names this process in the lease; default host:pid:random.
	Holder string
	// Lease is how long the lease lasts unrenewed: how long sealing
	// pauses when its holder dies (APPROVALS_AUDIT_LEASE, default 10s).
	Lease time.Duration
	// Interval is how often the sealer looks for new events (default
	// 250ms, so an event is sealed well within a second of its commit).
	Interval time.Duration
	// Limit caps the events one round seals (default 1000); a round that
	// sealed as many starts the next at once.
	Limit  int
	Logger *slog.Logger
}

// Default settings of the sealer.
const (
	DefaultSealLease    = 10 * time.Second
	DefaultSealInterval = 250 * time.Millisecond
	defaultSealLimit    = 1000
)

// Sealer seals committed events into the audit chain (audit.Seal). Every
// process runs one; the lease in the database lets one seal at a time and
// passes to another within a lease when its holder dies.
type Sealer struct {
	store audit.Store
	cfg   SealerConfig
}

// NewSealer returns the sealer of store.
func NewSealer(store audit.Store, cfg SealerConfig) *Sealer {
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		cfg.Holder = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultSealLease
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSealInterval
	}
	if cfg.Limit <= 0 {
		cfg.Limit = defaultSealLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sealer{store: store, cfg: cfg}
}

// Holder is the name this sealer holds the lease under.
func (s *Sealer) Holder() string { return s.cfg.Holder }

// Seal runs one round (tests drive the sealer by hand).
func (s *Sealer) Seal(ctx context.Context) (audit.SealResult, error) {
	return audit.Seal(ctx, s.store, audit.SealParams{Holder: s.cfg.Holder, Lease: s.cfg.Lease, Limit: s.cfg.Limit})
}

// Run seals until ctx ends, then gives the lease up so that another
// process takes over at once. A failure is logged once per streak.
func (s *Sealer) Run(ctx context.Context) {
	log := s.cfg.Logger
	failing, holding := false, false
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if holding {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				if err := audit.ReleaseLease(rctx, s.store, s.cfg.Holder); err != nil {
					log.Warn("audit sealer: could not give up the lease; another process takes over when it ends", "err", err)
				}
				cancel()
			}
			return
		case <-t.C:
		}
		res, err := s.Seal(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				log.Error("audit sealer: events are not being sealed", "err", err)
			}
			failing = true
		case err == nil:
			if failing {
				log.Info("audit sealer: sealing again")
			}
			failing = false
			if res.Holding && !holding {
				log.Info("audit sealer: this process seals the audit chain", "holder", s.cfg.Holder)
			}
			holding = res.Holding
		}
		next := s.cfg.Interval
		if res.Sealed == s.cfg.Limit {
			next = 0 // a backlog: go on at once
		}
		t.Reset(next)
	}
}
