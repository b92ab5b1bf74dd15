package postgres_test

import (
	"net/url"
	"testing"

	"github.com/approvals/approvals/postgres/pgtest"
)

// A database that takes no writes (a standby not yet promoted, a primary
// being demoted) fails the ping, so a write it refuses is answered 503
// unavailable with Retry-After, not 500 internal: the caller should try
// again once the failover is over.
func TestPingFailsOnAReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	if err := pgtest.OpenURL(t, u).Ping(t.Context()); err != nil {
		t.Fatalf("ping of a writable database: %v", err)
	}
	ro, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := ro.Query()
	q.Set("default_transaction_read_only", "on")
	ro.RawQuery = q.Encode()
	// The schema is migrated already, so opening it read-only writes nothing.
	if err := pgtest.OpenURL(t, ro.String()).Ping(t.Context()); err == nil {
		t.Fatal("ping of a read-only database succeeded; a write it refuses would be answered 500")
	}
}
