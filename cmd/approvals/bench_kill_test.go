package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// ackLog is what the load generator was told: for every action, the last
// state a 201, 200 or 303 confirmed, and the state a request still without
// an answer asked for (a request cut by the kill may or may not have
// committed; either outcome is correct).
type ackLog struct {
	mu       sync.Mutex
	acked    map[string]queue.State
	inflight map[string]queue.State
	n        atomic.Int64
	reached  chan struct{} // closed at the threshold-th acknowledgement
	once     sync.Once
	limit    int64
	// replays counts the replays answered 200 per action, replaying the
	// replays sent and not yet answered.
	replays, replaying map[string]int
}

func newAckLog(limit int64) *ackLog {
	return &ackLog{acked: map[string]queue.State{}, inflight: map[string]queue.State{},
		replays: map[string]int{}, replaying: map[string]int{}, reached: make(chan struct{}), limit: limit}
}

func (l *ackLog) sendReplay(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.replaying[id]++
}

func (l *ackLog) ackReplay(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.replays[id]++
	l.replaying[id]--
}

func (l *ackLog) send(id string, want queue.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight[id] = want
}

func (l *ackLog) ack(id string, got queue.State) {
	l.mu.Lock()
	l.acked[id] = got
	delete(l.inflight, id)
	l.mu.Unlock()
	if l.n.Add(1) == l.limit {
		l.once.Do(func() { close(l.reached) })
	}
}

// TestKillDuringLoadLosesNoAcknowledgedWrite kills `approvals serve` with
// SIGKILL while clients submit, replay, claim, complete, cancel and approve
// on PostgreSQL, restarts it, and reads back every action through the new
// process: each acknowledged submission exists, and holds the acknowledged
// decision or outcome (or the one a request cut by the kill asked for).
// Whatever answers before its commit (a batch handing out results early,
// say) fails here. Replay records are all there too: a lazy commit is only
// at risk when PostgreSQL itself goes down.
func TestKillDuringLoadLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	pgtest.BaseURL(t)
	dbURL := pgtest.URL(t)
	runKillDuringLoad(t, dbURL, func(first *apptest.Process) {
		if err := first.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}, nil, false)
}

// TestDatabaseCrashLosesOnlyReplayRecords crashes PostgreSQL (a cluster of
// the test's own, fsync on; pg_ctl stop -m immediate: no checkpoint, no
// flush of the WAL buffers) under the same load, starts it again (WAL
// recovery) and a new server process, and checks what "What a crash can
// lose" in docs/getting-started.md promises: every acknowledged submission, decision, claim
// and outcome survived; replay records may be missing (they commit without
// waiting for the flush), but never more than were acknowledged.
func TestDatabaseCrashLosesOnlyReplayRecords(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	crash := func(s *apptest.Process) {
		cluster.Crash(t)
		// The server process lost its database; the next one starts on
		// the recovered cluster.
		_ = s.Cmd.Process.Signal(syscall.SIGKILL)
		<-s.Exited
	}
	d, second := runKillDuringLoad(t, cluster.URL, crash, func() { cluster.Start(t) }, true)

	// The tail, one request at a time: a claim, a retry of it while in
	// progress (a lazy record: the first lazy commit after an idle spell
	// wakes PostgreSQL's WAL writer, which flushes at once), its completion
	// (durable) and a replay (lazy), with nothing committed after them,
	// then the crash. Under load later ordinary commits flush the lazy ones
	// before them; here nothing does, so a durable write made lazy by
	// mistake is lost, and this fails.
	api := &http.Client{Timeout: 10 * time.Second}
	body := `{"tool":"kill_exactly_once","intent_key":"tail","payload":{"n":1}}`
	c, err := apiCall(api, second.URL, d.Token, "/api/v1/actions", body, http.StatusCreated)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apiCall(api, second.URL, d.Token, "/api/v1/actions", body, http.StatusConflict); err != nil && !strings.Contains(err.Error(), "answered 409") {
		t.Fatal(err)
	}
	if _, err := apiCall(api, second.URL, d.Token, "/api/v1/actions/"+c.ID+"/complete", `{"result":{"ok":true}}`, http.StatusOK); err != nil {
		t.Fatal(err)
	}
	if _, err := apiCall(api, second.URL, d.Token, "/api/v1/actions", body, http.StatusOK); err != nil {
		t.Fatal(err)
	}
	crash(second)
	cluster.Start(t)
	third := d.Start()
	if got := readAction(t, third.URL, d.Token, c.ID); got != queue.StateDone {
		t.Errorf("the completion acknowledged just before the crash: stored %s, want done", got)
	}
	conn, err := pgx.Connect(t.Context(), cluster.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var kept int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE action_id = $1 AND kind = $2`, c.ID, queue.EventReplayed).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	t.Logf("the tail's replay record, committed lazily just before the crash: %d of 1 kept", kept)
}

// runKillDuringLoad runs the load against a server on dbURL, calls kill
// once enough writes were acknowledged (it must end first's life), then
// restart (when set) before it starts a new server process and checks
// every acknowledgement against what is stored.
func runKillDuringLoad(t *testing.T, dbURL string, kill func(first *apptest.Process), restart func(), replaysMayBeLost bool) (*apptest.Deployment, *apptest.Process) {
	d := apptest.NewDeployment(t, apptest.BuildBinary(t), apptest.DeploymentOptions{DatabaseURL: dbURL,
		Env: []string{"APPROVALS_SWEEP_INTERVAL=1h"}, Tools: `
tools:
  kill_exactly_once:
    class: exactly-once
    description: The caller supplies the intent key.
`})
	d.Command("correct horse battery staple\n", "user", "add", "--email", "ann@example.com", "--role", "approver")

	first := d.Start()
	ann := loginDashboard(t, first.URL, "ann@example.com", "correct horse battery staple")
	csrf := ann.csrf("/")

	const clients = 8
	acks := newAckLog(160)
	var (
		wg     sync.WaitGroup
		cut    atomic.Int64 // clients stopped by the kill
		killed atomic.Bool
	)
	for i := range clients {
		wg.Go(func() {
			api := &http.Client{Timeout: 10 * time.Second}
			for n := 0; ; n++ {
				if err := loadRound(api, ann.client, first.URL, d.Token, csrf, acks, i, n); err != nil {
					// A dead server gives no answer; a server whose database
					// died answers 5xx. Either only after the kill, and
					// nothing else ever (a 4xx, or a 2xx with the wrong
					// action, is a bug whether or not the database is up).
					if !killed.Load() || !isTransportError(err) && (restart == nil || !isServerError(err)) {
						t.Errorf("client %d: %v", i, err)
					}
					cut.Add(1)
					return
				}
			}
		})
	}
	select {
	case <-acks.reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d acknowledgements in 60s", acks.n.Load())
	}
	killed.Store(true)
	kill(first)
	<-first.Exited // kill may have waited already; a closed channel answers again
	wg.Wait()
	if cut.Load() != clients {
		t.Fatalf("%d of %d clients were cut by the kill: it did not land under load", cut.Load(), clients)
	}
	if restart != nil {
		restart()
	}

	second := d.Start()
	acks.mu.Lock()
	defer acks.mu.Unlock()
	counts := map[queue.State]int{}
	for id, want := range acks.acked {
		counts[want]++
		got := readAction(t, second.URL, d.Token, id)
		if got != want && got != acks.inflight[id] {
			t.Errorf("action %s: acknowledged %s, stored %s after the restart (in flight: %q)", id, want, got, acks.inflight[id])
		}
	}
	t.Logf("%d acknowledged writes on %d actions before the kill, last states %v; %d requests cut",
		acks.n.Load(), len(acks.acked), counts, len(acks.inflight))
	for _, s := range []queue.State{queue.StatePending, queue.StateApproved, queue.StateCancelled, queue.StateDone} {
		if counts[s] == 0 {
			t.Errorf("no acknowledged %s action: the load did not exercise every kind of write", s)
		}
	}
	checkReplayRecords(t, dbURL, acks, replaysMayBeLost)
	return d, second
}

// checkReplayRecords compares the replay records stored per action with
// the replays acknowledged (and those cut by the kill): never more; never
// fewer unless replaysMayBeLost (the database itself crashed).
func checkReplayRecords(t *testing.T, dbURL string, acks *ackLog, replaysMayBeLost bool) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT action_id::text, count(*) FROM events WHERE kind = $1 GROUP BY 1`, queue.EventReplayed)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		id string
		n  int
	}, error) {
		var v struct {
			id string
			n  int
		}
		err := r.Scan(&v.id, &v.n)
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, v := range stored {
		got[v.id] = v.n
	}
	acked, lost := 0, 0
	for id, n := range acks.replays {
		acked += n
		lost += max(0, n-got[id])
	}
	if acked == 0 {
		t.Fatal("no replay was acknowledged: the load did not exercise replays")
	}
	for id, n := range got {
		if n > acks.replays[id]+acks.replaying[id] {
			t.Errorf("action %s has %d replay records, %d replays were acknowledged and %d cut", id, n, acks.replays[id], acks.replaying[id])
		}
	}
	if lost > 0 && !replaysMayBeLost {
		t.Errorf("%d of %d acknowledged replay records are missing, though PostgreSQL did not go down", lost, acked)
	}
	t.Logf("replays: %d acknowledged, %d of their records lost", acked, lost)
}

// loadRound is one client's round: a new at-most-once submission (201
// pending), then its decision (the agent's cancel, 200, or an approval in
// the dashboard, 303; every third round leaves it pending, so acknowledged
// pending actions are there at the kill however the rounds interleave),
// then an exactly-once claim (201 in_progress) and its completion (200
// done).
func loadRound(api, staff *http.Client, base, token, csrf string, acks *ackLog, i, n int) error {
	key := fmt.Sprintf("kill:%d:%d", i, n)
	a, err := apiCall(api, base, token, "/api/v1/actions", fmt.Sprintf(`{"tool":"kill_at_most_once","intent_key":%q,"payload":{"n":%d}}`, key+":amo", n), http.StatusCreated)
	if err != nil {
		return err
	}
	acks.ack(a.ID, queue.StatePending)
	// The agent retries: the same intent and payload is a replay (200).
	if err := replay(api, base, token, fmt.Sprintf(`{"tool":"kill_at_most_once","intent_key":%q,"payload":{"n":%d}}`, key+":amo", n), a.ID, acks); err != nil {
		return err
	}
	switch n % 3 {
	case 2: // left pending
	case 0:
		acks.send(a.ID, queue.StateCancelled)
		if _, err := apiCall(api, base, token, "/api/v1/actions/"+a.ID+"/cancel", `{}`, http.StatusOK); err != nil {
			return err
		}
		acks.ack(a.ID, queue.StateCancelled)
	default:
		acks.send(a.ID, queue.StateApproved)
		res, err := staff.PostForm(base+"/actions/"+a.ID+"/approve", url.Values{"note": {"kill test"}, "_csrf": {csrf}})
		if err != nil {
			return err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return transportError{err}
		}
		if res.StatusCode != http.StatusSeeOther {
			return statusError{res.StatusCode, fmt.Sprintf("approve %s: %d %s", a.ID, res.StatusCode, snippet(body))}
		}
		acks.ack(a.ID, queue.StateApproved)
	}
	c, err := apiCall(api, base, token, "/api/v1/actions", fmt.Sprintf(`{"tool":"kill_exactly_once","intent_key":%q,"payload":{"n":%d}}`, key+":eo", n), http.StatusCreated)
	if err != nil {
		return err
	}
	if c.State != queue.StateInProgress {
		return fmt.Errorf("exactly-once submission answered %s, want in_progress", c.State)
	}
	acks.ack(c.ID, queue.StateInProgress)
	acks.send(c.ID, queue.StateDone)
	if _, err := apiCall(api, base, token, "/api/v1/actions/"+c.ID+"/complete", `{"result":{"ok":true}}`, http.StatusOK); err != nil {
		return err
	}
	acks.ack(c.ID, queue.StateDone)
	// And again after the outcome: the stored outcome is replayed.
	return replay(api, base, token, fmt.Sprintf(`{"tool":"kill_exactly_once","intent_key":%q,"payload":{"n":%d}}`, key+":eo", n), c.ID, acks)
}

// replay resubmits body, which action id holds, and wants the 200 of a
// replay of it.
func replay(api *http.Client, base, token, body, id string, acks *ackLog) error {
	acks.sendReplay(id)
	r, err := apiCall(api, base, token, "/api/v1/actions", body, http.StatusOK)
	if err != nil {
		return err
	}
	if r.ID != id {
		return fmt.Errorf("replay answered action %s, want %s", r.ID, id)
	}
	acks.ackReplay(id)
	return nil
}

// transportError is a request that got no answer: after the kill, the
// expected end of every client.
type transportError struct{ err error }

func (e transportError) Error() string { return "no answer: " + e.err.Error() }

// statusError is an answer with another status than the one asked for.
type statusError struct {
	status int
	msg    string
}

func (e statusError) Error() string { return e.msg }

// isServerError reports an answer 5xx: what a server whose database is
// down answers.
func isServerError(err error) bool {
	var se statusError
	return errors.As(err, &se) && se.status >= 500
}

func isTransportError(err error) bool {
	var te transportError
	var ue *url.Error
	return errors.As(err, &te) || errors.As(err, &ue)
}

func apiCall(c *http.Client, base, token, path, body string, want int) (*queue.Action, error) {
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return nil, transportError{err}
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, transportError{err}
	}
	var a queue.Action
	if res.StatusCode != want || json.Unmarshal(b, &a) != nil || a.ID == "" {
		return nil, statusError{res.StatusCode, fmt.Sprintf("POST %s answered %d, want %d: %s", path, res.StatusCode, want, snippet(b))}
	}
	return &a, nil
}

// readAction reads an action's state through the API of a running server.
func readAction(t *testing.T, base, token, id string) queue.State {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/actions/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var a queue.Action
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &a) != nil {
		t.Fatalf("GET action %s after the restart: %d %s", id, res.StatusCode, bytes.TrimSpace(b))
	}
	return a.State
}

// snippet is the start of an answer, for a failure message.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
