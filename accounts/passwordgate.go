package accounts

import (
	"context"
	"time"
)

// PasswordGate bounds how many password checks run at once. A bcrypt
// check costs tens of milliseconds of one core by design; without a bound,
// a burst of sign-in attempts (each one anonymous and cheap to send)
// occupies every core and starves the agents' API.
type PasswordGate struct {
	slots chan struct{}
	wait  time.Duration
}

// NewPasswordGate lets n checks run at once (default 4); a check that
// finds them all busy waits up to wait (default 2s) for one.
func NewPasswordGate(n int, wait time.Duration) *PasswordGate {
	if n <= 0 {
		n = 4
	}
	if wait <= 0 {
		wait = 2 * time.Second
	}
	return &PasswordGate{slots: make(chan struct{}, n), wait: wait}
}

// Acquire takes a slot, waiting at most the gate's wait; ok is false when
// none came free (the caller answers 429 with Retry-After) or ctx ended.
func (g *PasswordGate) Acquire(ctx context.Context) (release func(), ok bool) {
	select {
	case g.slots <- struct{}{}:
		return g.release, true
	default:
	}
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.release, true
	case <-t.C:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
}

func (g *PasswordGate) release() { <-g.slots }
