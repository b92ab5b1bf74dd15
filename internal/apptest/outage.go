package apptest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/approvals/approvals/queue"
)

// ErrOutage is what storage answers during an Outage.
var ErrOutage = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

// Outage is a switch that makes the service's storage stop answering, as
// a database that went away would: action reads, transitions and pings
// fail while it lasts. Pass Wrap as Options.WrapStore.
type Outage struct{ down atomic.Bool }

// Begin starts the outage; End ends it.
func (o *Outage) Begin() { o.down.Store(true) }

// End ends the outage.
func (o *Outage) End() { o.down.Store(false) }

// Wrap returns s behind the switch.
func (o *Outage) Wrap(s queue.Store) queue.Store { return outageStore{s, o} }

type outageStore struct {
	queue.Store
	o *Outage
}

func (s outageStore) ActionGetByID(ctx context.Context, id string) (*queue.Action, error) {
	if s.o.down.Load() {
		return nil, ErrOutage
	}
	return s.Store.ActionGetByID(ctx, id)
}

func (s outageStore) ActionTransition(ctx context.Context, p queue.ActionTransitionParams) (*queue.Action, error) {
	if s.o.down.Load() {
		return nil, ErrOutage
	}
	return s.Store.ActionTransition(ctx, p)
}

func (s outageStore) Ping(ctx context.Context) error {
	if s.o.down.Load() {
		return ErrOutage
	}
	return s.Store.Ping(ctx)
}
