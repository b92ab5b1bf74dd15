// Package testclock is the one injected clock of the tests: a test moves
// time forward (to make a claim stale or an approval due) instead of
// sleeping.
package testclock

import (
	"sync"
	"time"
)

// Clock is real time plus an offset the test advances, or, once frozen, a
// fixed base time that only Advance moves, for tests that assert a boundary
// to the microsecond.
type Clock struct {
	mu     sync.Mutex
	base   time.Time // when set, the clock is frozen at base + offset
	offset time.Duration
}

// Running returns a clock that follows real time until advanced.
func Running() *Clock { return &Clock{} }

// Frozen returns a clock standing still at the present, truncated to the
// microsecond the service keeps.
func Frozen() *Clock {
	return &Clock{base: time.Now().UTC().Truncate(time.Microsecond)}
}

// At returns a clock standing still at t, which only Advance moves: for a
// test whose figures depend on the date (a due time, an hour of a chart).
func At(t time.Time) *Clock { return &Clock{base: t} }

// Clone returns a clock of its own that starts where c is now, running or
// frozen as c is, for subtests that each move their clock.
func (c *Clock) Clone() *Clock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &Clock{base: c.base, offset: c.offset}
}

// Now is the clock's time; pass it as queue.Options.Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.base.IsZero() {
		return c.base.Add(c.offset)
	}
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}
