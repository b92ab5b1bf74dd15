package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres/pgtest"
)

// These tests run the binary as processes on PostgreSQL and read the chain
// with SQL, so that nothing of the sealer's own code judges its work.

const auditTools = `
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
`

// submitTo submits one action through p's REST API; an error instead of a
// failed test, for goroutines.
func submitTo(d *apptest.Deployment, p *apptest.Process, key string) error {
	body, _ := json.Marshal(map[string]any{"tool": "send_customer_email",
		"payload": map[string]any{"customer_id": key, "topic": "welcome"}})
	req, _ := http.NewRequest("POST", p.URL+"/api/v1/actions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("submit %s: %d", key, res.StatusCode)
	}
	return nil
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func count(t *testing.T, conn *pgx.Conn, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// unsealedSQL counts the events no link names.
const unsealedSQL = `SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.event_id = e.id)`

// awaitAllSealed waits until every event is in the chain.
func awaitAllSealed(t *testing.T, conn *pgx.Conn, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := count(t, conn, unsealedSQL)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events unsealed after %s", n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkOneChain reads the chain with SQL and fails unless it is one line:
// seqs 1..n, every event once, each link's prev_hash the hash before it,
// in the order of (txid, id), with the head at its end.
func checkOneChain(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT c.seq, c.event_id, c.prev_hash, c.hash, e.txid::text
		FROM audit_chain c JOIN events e ON e.id = c.event_id ORDER BY c.seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var (
		n                 int64
		prev              = make([]byte, 32)
		lastTx, lastEvent int64
	)
	for rows.Next() {
		var (
			seq, id int64
			ph, h   []byte
			txText  string
		)
		if err := rows.Scan(&seq, &id, &ph, &h, &txText); err != nil {
			t.Fatal(err)
		}
		n++
		tx, _ := strconv.ParseInt(txText, 10, 64)
		switch {
		case seq != n:
			t.Fatalf("link %d has seq %d: a gap or a repeat", n, seq)
		case !bytes.Equal(ph, prev):
			t.Fatalf("seq %d does not follow seq %d: a fork", seq, seq-1)
		case tx < lastTx || tx == lastTx && id < lastEvent:
			t.Fatalf("seq %d (event %d of transaction %d) is sealed after event %d of transaction %d", seq, id, tx, lastEvent, lastTx)
		}
		prev, lastTx, lastEvent = h, tx, id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if events := count(t, conn, `SELECT count(*) FROM events`); events != n {
		t.Fatalf("%d links for %d events", n, events)
	}
	if head := count(t, conn, `SELECT seq FROM audit_head`); head != n {
		t.Fatalf("the head is at seq %d, the chain at %d", head, n)
	}
}

// TestSealingAcrossProcessesWaitsForOlderTransactions: two processes take
// submissions from eight clients while a transaction that wrote an event
// stays open and later ones commit. The sealer seals nothing past that
// transaction while it is open, then everything: one gapless chain, in
// (txid, id) order, which approvals audit verify accepts.
func TestSealingAcrossProcessesWaitsForOlderTransactions(t *testing.T) {
	t.Parallel()
	// A cluster of its own: the open transaction holds back sealing on
	// the whole cluster, and no other test's transaction may hold back
	// this one's.
	cluster := pgtest.NewCluster(t)
	d := apptest.NewDeployment(t, apptest.BuildBinary(t), apptest.DeploymentOptions{Tools: auditTools,
		DatabaseURL: cluster.URL, Env: []string{"APPROVALS_AUDIT_LEASE=2s"}})
	procs := []*apptest.Process{d.Start(), d.Start()}
	conn := connect(t, d.DatabaseURL)

	var (
		submitted atomic.Int64
		writers   sync.WaitGroup
		stop      = make(chan struct{})
	)
	for w := range 8 {
		writers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := submitTo(d, procs[(w+i)%2], fmt.Sprintf("c-%d-%d", w, i)); err != nil {
					t.Error(err)
					return
				}
				submitted.Add(1)
			}
		})
	}
	for submitted.Load() < 40 {
		time.Sleep(5 * time.Millisecond)
	}
	// The held transaction writes an event, then waits while later
	// transactions commit theirs.
	held, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var heldTx int64
	if err := held.QueryRow(t.Context(), `INSERT INTO events (subject, kind, actor, channel, at, fanned_out)
		VALUES ('user:held@example.com', 'login', 'user:held@example.com', 'dashboard', now(), true)
		RETURNING txid::text::bigint`).Scan(&heldTx); err != nil {
		t.Fatal(err)
	}
	watch := connect(t, d.DatabaseURL)
	before := submitted.Load()
	deadline := time.Now().Add(1500 * time.Millisecond)
	var sawLater bool
	for time.Now().Before(deadline) || !sawLater {
		past := count(t, watch, `SELECT count(*) FROM audit_chain c JOIN events e ON e.id = c.event_id WHERE e.txid >= $1::bigint::text::xid8`, heldTx)
		if past > 0 {
			t.Fatalf("%d events of transactions from %d on were sealed while %d was open", past, heldTx, heldTx)
		}
		later := count(t, watch, `SELECT count(*) FROM events WHERE txid > $1::bigint::text::xid8`, heldTx)
		sawLater = sawLater || later > 0 && submitted.Load() > before+10
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatal("no later transaction committed while the held one was open")
		}
		time.Sleep(50 * time.Millisecond)
	}
	waiting := apptest.ScrapeMetric(t, procs[0].URL, "approvals_audit_unsealed")
	if waiting < 10 {
		t.Fatalf("approvals_audit_unsealed %v while the held transaction is open, want the later events", waiting)
	}
	if err := held.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few more commits after it
	close(stop)
	writers.Wait()

	awaitAllSealed(t, conn, 10*time.Second)
	checkOneChain(t, conn)
	heldSeq := count(t, conn, `SELECT c.seq FROM audit_chain c JOIN events e ON e.id = c.event_id WHERE e.subject = 'user:held@example.com'`)
	if later := count(t, conn, `SELECT count(*) FROM audit_chain c JOIN events e ON e.id = c.event_id
		WHERE e.txid > $1::bigint::text::xid8 AND c.seq < $2`, heldTx, heldSeq); later != 0 {
		t.Fatalf("%d later transactions' events are sealed before the held one's (seq %d)", later, heldSeq)
	}
	var holder string
	if err := conn.QueryRow(t.Context(), `SELECT holder FROM audit_head`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	pids := []string{strconv.Itoa(procs[0].Cmd.Process.Pid), strconv.Itoa(procs[1].Cmd.Process.Pid)}
	if !strings.Contains(holder, ":"+pids[0]+":") && !strings.Contains(holder, ":"+pids[1]+":") {
		t.Fatalf("the lease is held by %q, neither process (%v)", holder, pids)
	}
	if out := d.Command("", "audit", "verify"); !strings.Contains(out, "verified") {
		t.Fatalf("audit verify: %s", out)
	}
	t.Logf("%d submissions; the held transaction's event sealed at seq %d", submitted.Load(), heldSeq)
}

// TestSealerKilledMidSealIsTakenOver kills (SIGKILL) the process holding
// the lease while its append waits inside its transaction; another process
// takes the lease over once it has run out and seals from the same head:
// no gap, no fork, nothing sealed twice.
func TestSealerKilledMidSealIsTakenOver(t *testing.T) {
	t.Parallel()
	d := apptest.NewDeployment(t, apptest.BuildBinary(t), apptest.DeploymentOptions{Tools: auditTools,
		DatabaseURL: pgtest.URL(t), Env: []string{"APPROVALS_AUDIT_LEASE=2s"}})
	conn := connect(t, d.DatabaseURL)
	first := d.Start()
	for i := range 5 {
		if err := submitTo(d, first, fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	awaitAllSealed(t, conn, 30*time.Second)

	// The next append waits for this lock inside its transaction, after
	// it moved the head.
	lock, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(t.Context(), `LOCK TABLE audit_round IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := submitTo(d, first, fmt.Sprintf("during-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	watch := connect(t, d.DatabaseURL)
	deadline := time.Now().Add(30 * time.Second)
	for count(t, watch, `SELECT count(*) FROM pg_locks WHERE relation = 'audit_round'::regclass AND NOT granted`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sealer never waited on its append")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := first.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.Exited
	if err := lock.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}

	second := d.Start()
	for i := range 5 {
		if err := submitTo(d, second, fmt.Sprintf("after-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Within the 2s lease of APPROVALS_AUDIT_LEASE (and well before the
	// default 10s would have run out).
	awaitAllSealed(t, conn, 7*time.Second)
	checkOneChain(t, conn)
	var holder string
	if err := conn.QueryRow(t.Context(), `SELECT holder FROM audit_head`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(holder, ":"+strconv.Itoa(second.Cmd.Process.Pid)+":") {
		t.Fatalf("the lease is held by %q, not the second process", holder)
	}
	if out := d.Command("", "audit", "verify"); !strings.Contains(out, "verified") {
		t.Fatalf("audit verify: %s", out)
	}
}

// TestEventsAreSealedWithinASecond: with the default interval, each
// submission is in the chain within a second of its 201 (on a cluster of
// its own, so that no other test's transaction holds the horizon back).
func TestEventsAreSealedWithinASecond(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	d := apptest.NewDeployment(t, apptest.BuildBinary(t), apptest.DeploymentOptions{Tools: auditTools, DatabaseURL: cluster.URL})
	p := d.Start()
	conn := connect(t, d.DatabaseURL)
	awaitAllSealed(t, conn, 30*time.Second) // the token's event; the lease is taken
	var worst time.Duration
	for i := range 10 {
		if err := submitTo(d, p, fmt.Sprintf("c-%d", i)); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		awaitAllSealed(t, conn, 5*time.Second)
		worst = max(worst, time.Since(acked))
		time.Sleep(time.Duration(i*37%200) * time.Millisecond) // land at different points of the interval
	}
	if worst > time.Second {
		t.Fatalf("a submission waited %s for its seal, more than a second", worst)
	}
	t.Logf("slowest seal after the 201: %s", worst)
}
