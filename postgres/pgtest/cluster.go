package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a PostgreSQL cluster of one test's own, durable (fsync and
// synchronous_commit on), for tests that crash the database: they must not
// do that to the server every other test shares.
type Cluster struct {
	// URL reaches the cluster's postgres database as user postgres.
	URL string

	bin, dir string
	run      []string // runuser prefix when we are root
	// opts replace the listening options of Start (a Unix socket only).
	opts string
}

// NewCluster creates and starts a cluster in a temporary directory; it is
// stopped and removed when the test ends. It needs PostgreSQL's server
// binaries (initdb, pg_ctl), which scripts/test installs when missing.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c := newCluster(t)
	// A Unix socket in the cluster's own directory, no TCP port: nothing
	// else can take it between choosing and starting, so the port number
	// can be the default.
	c.URL = "postgres:///postgres?user=postgres&sslmode=disable&host=" + url.QueryEscape(c.dir)
	c.Start(t)
	return c
}

// newCluster runs initdb in a temporary directory, removed (the cluster
// stopped first) when the test ends.
func newCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := binDir()
	if bin == "" {
		t.Fatal("this test starts a PostgreSQL cluster of its own and found no initdb: install PostgreSQL (scripts/test does)")
	}
	dir, err := os.MkdirTemp("", "approvals-pgcluster-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{bin: bin, dir: dir}
	t.Cleanup(func() {
		_ = c.pgctl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	if os.Getuid() == 0 {
		// initdb refuses to run as root: the cluster belongs to postgres.
		c.run = []string{"runuser", "-u", "postgres", "--"}
		c.chown(t, dir)
	}
	if out, err := c.command(filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	return c
}

// chown gives dir to the postgres user when we are root.
func (c *Cluster) chown(t testing.TB, dir string) {
	t.Helper()
	if c.run == nil {
		return
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root, the cluster needs the postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// Start starts the cluster (again, after Crash: PostgreSQL then replays
// its WAL, as after a power cut) and waits until it accepts connections.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	// wal_writer_delay at its maximum: a commit made without waiting for
	// its flush stays in the WAL buffers until a later ordinary commit or
	// the WAL writer flushes it, so a crash test can see what it loses.
	listen := c.opts
	if listen == "" {
		listen = "-c listen_addresses=''"
	}
	opts := fmt.Sprintf("-k %s %s -c fsync=on -c synchronous_commit=on -c wal_writer_delay=10s -c max_connections=100", c.dir, listen)
	if err := c.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(c.dir, "server.log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		t.Fatalf("start PostgreSQL: %v\n%s", err, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL)
		if err == nil {
			conn.Close(ctx)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("PostgreSQL started but does not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Crash stops the cluster the way a crash does: every server process quits
// at once, without a checkpoint or a flush of the WAL buffers
// (pg_ctl stop -m immediate).
func (c *Cluster) Crash(t testing.TB) {
	t.Helper()
	if err := c.pgctl("stop", "-m", "immediate", "-w"); err != nil {
		t.Fatalf("crash PostgreSQL: %v", err)
	}
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) pgctl(args ...string) error {
	out, err := c.command(filepath.Join(c.bin, "pg_ctl"), append([]string{"-D", c.data()}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %v: %w\n%s", args, err, out)
	}
	return nil
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	argv := append(slices.Clone(c.run), name)
	argv = append(argv, args...)
	return exec.Command(argv[0], argv[1:]...)
}

// binDir finds PostgreSQL's server binaries as scripts/pg-env does: the
// newest /usr/lib/postgresql/*/bin, else initdb on the PATH.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}
