package postgres

import (
	"testing"
	"time"
)

// The listener backs off while the database stays away, and starts again
// from 100ms once a connection has listened: a second failover in the same
// process is heard as quickly as the first.
func TestListenBackoffResetsAfterAConnectionListened(t *testing.T) {
	t.Parallel()
	var b listenBackoff
	var got []time.Duration
	for range 8 { // a first failover: the database is away for a while
		got = append(got, b.next(false))
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits while the database is away: %v, want %v ms", got, want)
		}
	}
	// The new primary answered and the listener listened, then the
	// connection broke again (a second failover).
	if d := b.next(true); d != 100*time.Millisecond {
		t.Fatalf("after a connection that listened the wait is %v, want 100ms", d)
	}
	if d := b.next(false); d != 200*time.Millisecond {
		t.Fatalf("the next failed try waits %v, want 200ms", d)
	}
}
