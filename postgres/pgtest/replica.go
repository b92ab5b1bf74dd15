package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pair is a primary and a synchronous streaming standby, each a cluster of
// the test's own on a TCP port of 127.0.0.1, for tests of a failover.
type Pair struct {
	// URL names both servers, the primary first, and asks for the one
	// that takes writes (target_session_attrs=read-write), as an
	// operator's connection string does.
	URL              string
	Primary, Standby *Cluster
}

// NewPair creates a primary, copies it with pg_basebackup into a standby
// that streams from it, and waits until the standby is its synchronous
// standby: a commit is acknowledged only once the standby has it.
func NewPair(t testing.TB) *Pair {
	t.Helper()
	primary := newCluster(t)
	pport, sport := freePort(t), freePort(t)
	primary.opts = fmt.Sprintf("-c port=%d -c listen_addresses=127.0.0.1 -c wal_level=replica -c max_wal_senders=4 -c synchronous_standby_names=standby", pport)
	primary.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pport)
	primary.Start(t)

	standby := &Cluster{bin: primary.bin, run: primary.run}
	dir, err := os.MkdirTemp("", "approvals-pgstandby-")
	if err != nil {
		t.Fatal(err)
	}
	standby.dir = dir
	t.Cleanup(func() {
		_ = standby.pgctl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	primary.chown(t, dir)
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=standby", pport)
	if out, err := standby.command(filepath.Join(standby.bin, "pg_basebackup"), "-D", standby.data(), "-d", conninfo, "-X", "stream", "-R", "-c", "fast").CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	standby.opts = fmt.Sprintf("-c port=%d -c listen_addresses=127.0.0.1 -c synchronous_standby_names=''", sport)
	standby.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", sport)
	standby.Start(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var state string
		err := func() error {
			conn, err := pgx.Connect(ctx, primary.URL)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			return conn.QueryRow(ctx, `SELECT coalesce(max(sync_state), '') FROM pg_stat_replication WHERE application_name = 'standby'`).Scan(&state)
		}()
		if err == nil && state == "sync" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the standby never became synchronous (%q, %v)", state, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &Pair{Primary: primary, Standby: standby,
		URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2", pport, sport)}
}

// Promote makes the standby a primary (pg_ctl promote) and waits until it
// takes writes.
func (c *Cluster) Promote(t testing.TB) {
	t.Helper()
	if err := c.pgctl("promote", "-w", "-t", "30"); err != nil {
		t.Fatalf("promote: %v", err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
