// Package longpoll holds the requests that wait for an action to change:
// agents' long-polls (REST ?wait, MCP waits), each a Poll subscribed to its
// action's changes, and the caps on them and on the dashboard's event
// streams. It reads actions and subscribes to their changes through the
// store; it decides nothing, so it lives beside the domain, not in it.
package longpoll

import (
	"context"
	"time"

	"github.com/approvals/approvals/queue"
)

// Store is what long-polls need of storage: a subscription to one action's
// changes and a read of the action.
type Store interface {
	ActionGetByID(ctx context.Context, id string) (*queue.Action, error)
	SubscribeAction(id string, wake func()) queue.Subscription
}

// Options configure the long-polls of a process.
type Options struct {
	// WaitRecheck is the slow timed re-read of a long-poll, a last resort
	// for a lost notification: a store wakes every long-poll itself when it
	// may have lost changes (PostgreSQL's listener reconnecting). Default
	// 15s; each recheck is a read, and at 2s ten thousand long-polls made
	// 5,000 reads a second.
	WaitRecheck time.Duration
	// Waiters cap concurrent long-polls of agents (REST ?wait, MCP waits).
	Waiters WaiterLimits
	// MaxStreams caps the dashboard's event streams, a pool apart
	// (APPROVALS_MAX_STREAMS; default DefaultMaxStreams).
	MaxStreams int
	// Done is closed when the process begins to shut down: every
	// long-poll then answers at once with the current state of its action.
	Done <-chan struct{}
}

// Polls are the long-polls of one process and the caps on its waits.
type Polls struct {
	store Store
	opts  Options
	// polls are the long-polls under way (the approvals_waiters gauge),
	// woken when Options.Done closes.
	polls pollSet
	// waiterPool caps concurrent long-polls of agents
	// (APPROVALS_MAX_WAITERS), streamPool the dashboard's event streams
	// (APPROVALS_MAX_STREAMS).
	waiterPool, streamPool *waiterPool
}

// New returns the long-polls of a process over store.
func New(store Store, opts Options) *Polls {
	if opts.WaitRecheck <= 0 {
		opts.WaitRecheck = 15 * time.Second
	}
	s := &Polls{store: store, opts: opts,
		waiterPool: newWaiterPool(opts.Waiters), streamPool: newWaiterPool(StreamLimits(opts.MaxStreams))}
	if opts.Done != nil {
		go func() {
			<-opts.Done
			s.polls.stop()
		}()
	}
	return s
}
