package longpoll

import (
	"sync"

	"github.com/approvals/approvals/queue"
)

// WaiterLimits cap the requests that hold a connection open waiting for a
// change: REST long-polls (?wait), MCP waits and dashboard event streams.
// Each holds a goroutine and a subscription; without a cap one agent could
// hold thousands.
type WaiterLimits struct {
	// Total caps waiters in this process; default 1000.
	Total int
	// PerHolder caps waiters of one agent token or one staff user;
	// default 100 (or Total, when smaller).
	PerHolder int
}

// WithDefaults fills unset limits.
func (l WaiterLimits) WithDefaults() WaiterLimits {
	if l.Total <= 0 {
		l.Total = 1000
	}
	if l.PerHolder <= 0 {
		l.PerHolder = min(100, l.Total)
	}
	return l
}

// DefaultMaxStreams is the dashboard event streams a process holds at once
// unless APPROVALS_MAX_STREAMS says otherwise.
const DefaultMaxStreams = 500

// StreamLimits cap the dashboard's event streams: Total in the process
// (default DefaultMaxStreams), PerHolder per staff user (default 100, or
// Total when smaller).
func StreamLimits(total int) WaiterLimits {
	if total <= 0 {
		total = DefaultMaxStreams
	}
	return WaiterLimits{Total: total}.WithDefaults()
}

// waiterPool counts the waiters under way.
type waiterPool struct {
	limits WaiterLimits
	mu     sync.Mutex
	total  int
	held   map[string]int
}

func newWaiterPool(l WaiterLimits) *waiterPool {
	return &waiterPool{limits: l.WithDefaults(), held: map[string]int{}}
}

// AcquireWaiter takes a waiter slot for holder ("agent:NAME", "user:EMAIL")
// and returns the function that gives it back; past a limit it returns a
// too_many_waiters error saying which. Call it before a wait that may
// block, and release when the wait ends (before its answer is written;
// release may be called more than once). Agents' long-polls take these;
// the dashboard's event streams have a pool of their own (AcquireStream).
func (s *Polls) AcquireWaiter(holder string) (release func(), err error) {
	return s.waiterPool.acquire(holder, "waiting requests", "APPROVALS_MAX_WAITERS", "retry in a few seconds or ask without wait")
}

// AcquireStream takes a slot of the dashboard's event streams for a staff
// user, from a pool apart from the agents' long-polls (StreamLimits), so
// that agent tokens holding every waiter slot cannot take the staff's live
// view; past a limit it returns a too_many_waiters error saying which.
func (s *Polls) AcquireStream(holder string) (release func(), err error) {
	return s.streamPool.acquire(holder, "live event streams", "APPROVALS_MAX_STREAMS", "reload the page in a few seconds")
}

func (p *waiterPool) acquire(holder, what, setting, advice string) (release func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.total >= p.limits.Total:
		return nil, queue.Errorf(queue.CodeTooManyWaiters, "this server already holds %d %s (its limit, %s); %s", p.limits.Total, what, setting, advice)
	case p.held[holder] >= p.limits.PerHolder:
		return nil, queue.Errorf(queue.CodeTooManyWaiters, "%s already holds %d %s (the limit per holder); %s", holder, p.limits.PerHolder, what, advice)
	}
	p.total++
	p.held[holder]++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.total--
			if p.held[holder]--; p.held[holder] == 0 {
				delete(p.held, holder)
			}
		})
	}, nil
}
