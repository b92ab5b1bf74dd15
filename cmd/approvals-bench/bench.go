package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/cli"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
)

// Bounds of one bench run: it is a measuring tool for a development machine,
// not a way to flood a server.
const (
	benchMaxClients     = 256
	benchMaxDuration    = 10 * time.Minute
	benchMaxRequests    = 10_000_000
	benchMaxReplayKeys  = 100_000
	benchRequestTimeout = 30 * time.Second
)

// benchConfig is one parsed approvals-bench invocation.
type benchConfig struct {
	URL         string
	Token       string
	Clients     int
	Duration    time.Duration
	Scenario    string
	Tool        string
	ReplayKeys  int
	MaxRequests int
	Path        string
	Cookie      string // list scenario: a dashboard session cookie (NAME=VALUE)
	// Sweep and sqlite-insert scenarios: storage is opened directly, not
	// through HTTP.
	DatabaseURL string
	Rounds      int
	Table       string // sqlite-insert: one-index or actions
	Addr        string // floor-server: where to listen
	// Waiters scenario: how many long-polls, the server's pid (for its
	// memory) and how fast to cancel their actions.
	Waiters    int
	ServerPID  int
	CancelRate float64
	// Deliver scenario: where the server's channel and executor send, the
	// pace of submissions and approvals, the tool with the executor, and
	// an approver's CSRF token (with Cookie, the session).
	Receiver     string
	Rate         float64
	ExecutorTool string
	CSRF         string
}

var benchScenarios = []string{"new", "replay", "claim", "list", "sweep", "sqlite-insert", "floor-server", "waiters", "deliver"}

const benchUsage = `usage: approvals-bench [flags]

Drives a running server on a loopback address with N concurrent keep-alive
clients for a fixed time and prints requests/s and p50/p95/p99 latency.

scenarios:
  new     new at-most-once submissions, one unique intent each (201)
  replay  pre-submits --replay-keys intents, then resubmits them (200 replay)
  claim   exactly-once submit (201 in_progress) then complete (200): one cycle;
          --tool must be an exactly-once tool without an intent template
  list    GET --path (default /api/v1/actions?state=pending)
  waiters holds --waiters long-polls on pending actions (one connection each),
          runs the new-submission load beside them for --duration, then
          cancels them at --cancel-rate and times each poll's answer
  deliver listens on --receiver for a webhook channel (/events) and a webhook
          executor (/execute) the server's tools file points at; submits
          --tool at --rate for --duration and times each from its sending to
          its action.pending at the channel; then submits as many
          --executor-tool actions, approves them in the dashboard at --rate
          (--cookie, --csrf: an approver's session) and times each from the
          approval's sending to the executor's delivery
  sweep   times maintenance.Sweeper.Sweep --rounds times on --database-url (no HTTP)
  sqlite-insert
          the yardstick of SQLite submissions (no server): --clients goroutines
          insert new intents into a NEW file --database-url sqlite:PATH through
          modernc SQLite with the store's settings (WAL, synchronous=FULL, one
          write connection); --table one-index (default) or actions
  floor-server
          serves the HTTP floor on --addr until interrupted: a plain net/http
          server that answers new, replay and claim requests with an
          action's shape and does nothing else, to measure what HTTP alone
          costs on this machine (docs/performance.md)

flags:
  --url URL            server base URL, loopback only (default http://127.0.0.1:8080)
  --token TOKEN        agent token (default $APPROVALS_TOKEN)
  --clients N          concurrent clients (default 16, at most 256)
  --duration D         measuring time (default 10s, at most 10m)
  --scenario S         one of the scenarios above (default new)
  --tool NAME          tool to submit (default bench_unregistered; bench_exactly_once for claim; bench_notify for deliver)
  --replay-keys K      intents held for the replay scenario (default 1000)
  --max-requests N     stop after N operations (default 2000000)
  --path PATH          path for the list scenario
  --cookie NAME=VALUE  cookie sent with every request (a dashboard session for --path /)
  --database-url URL   storage for the sweep scenario (default $DATABASE_URL)
  --rounds N           sweeps to time (default 20)
  --table T            sqlite-insert: one-index or actions (default one-index)
  --addr ADDR          floor-server: loopback address to listen on (default 127.0.0.1:18300)
  --waiters N          waiters: long-polls held at once, one connection each (default 10000;
                       the server needs APPROVALS_MAX_WAITERS=N,N)
  --server-pid PID     waiters: the server's pid, whose memory is reported
  --cancel-rate R      waiters: cancellations per second once the load ran (default 2000)
  --receiver ADDR      deliver: loopback address to receive on (default 127.0.0.1:18301)
  --rate R             deliver: submissions, then approvals, per second (default 50)
  --executor-tool NAME deliver: the at-most-once tool with the webhook executor (none: skip the approvals)
  --csrf TOKEN         deliver: the dashboard session's CSRF token (with --cookie)
`

func parseBenchConfig(args []string) (benchConfig, error) {
	c := benchConfig{}
	fs := cli.NewFlags("approvals-bench")
	fs.StringVar(&c.URL, "url", "http://127.0.0.1:8080", "server base URL")
	fs.StringVar(&c.Token, "token", env("APPROVALS_TOKEN"), "agent token")
	fs.IntVar(&c.Clients, "clients", 16, "concurrent clients")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measuring time")
	fs.StringVar(&c.Scenario, "scenario", "new", "scenario")
	fs.StringVar(&c.Tool, "tool", "", "tool name")
	fs.IntVar(&c.ReplayKeys, "replay-keys", 1000, "intents held for replay")
	fs.IntVar(&c.MaxRequests, "max-requests", 2_000_000, "operation cap")
	fs.StringVar(&c.Path, "path", "/api/v1/actions?state=pending", "path for the list scenario")
	fs.StringVar(&c.Cookie, "cookie", "", "cookie sent with every request")
	fs.StringVar(&c.DatabaseURL, "database-url", env("DATABASE_URL"), "storage for the sweep scenario")
	fs.IntVar(&c.Rounds, "rounds", 20, "sweeps to time")
	fs.StringVar(&c.Table, "table", "one-index", "sqlite-insert: one-index or actions")
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:18300", "floor-server: loopback address to listen on")
	fs.IntVar(&c.Waiters, "waiters", 10000, "waiters: long-polls to hold")
	fs.IntVar(&c.ServerPID, "server-pid", 0, "waiters: the server's pid, to report its memory")
	fs.Float64Var(&c.CancelRate, "cancel-rate", 2000, "waiters: cancellations per second")
	fs.StringVar(&c.Receiver, "receiver", "127.0.0.1:18301", "deliver: loopback address to receive on")
	fs.Float64Var(&c.Rate, "rate", 50, "deliver: submissions, then approvals, per second")
	fs.StringVar(&c.ExecutorTool, "executor-tool", "", "deliver: the tool with the webhook executor")
	fs.StringVar(&c.CSRF, "csrf", "", "deliver: the dashboard session's CSRF token")
	if err := cli.ParseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, fmt.Errorf("%w\n\n%s", err, benchUsage)
	}
	if !slices.Contains(benchScenarios, c.Scenario) {
		return c, fmt.Errorf("--scenario %q: use one of %s", c.Scenario, strings.Join(benchScenarios, ", "))
	}
	if c.Scenario == "floor-server" {
		return c, nil
	}
	if c.Scenario == "sweep" {
		if c.DatabaseURL == "" {
			return c, errors.New("--database-url (or DATABASE_URL) is required for the sweep scenario")
		}
		if c.Rounds < 1 || c.Rounds > 10_000 {
			return c, errors.New("--rounds must be from 1 to 10000")
		}
		return c, nil
	}
	if c.Scenario == "sqlite-insert" {
		path, ok := strings.CutPrefix(c.DatabaseURL, "sqlite:")
		if !ok || path == "" {
			return c, errors.New("--database-url sqlite:PATH (a file that does not exist yet) is required for the sqlite-insert scenario")
		}
		if c.Table != "one-index" && c.Table != "actions" {
			return c, fmt.Errorf("--table %q: use one-index or actions", c.Table)
		}
	}
	if c.Clients < 1 || c.Clients > benchMaxClients {
		return c, fmt.Errorf("--clients must be from 1 to %d", benchMaxClients)
	}
	if c.Duration < 100*time.Millisecond || c.Duration > benchMaxDuration {
		return c, fmt.Errorf("--duration must be from 100ms to %s", benchMaxDuration)
	}
	if c.MaxRequests < 1 || c.MaxRequests > benchMaxRequests {
		return c, fmt.Errorf("--max-requests must be from 1 to %d", benchMaxRequests)
	}
	if c.ReplayKeys < 1 || c.ReplayKeys > benchMaxReplayKeys {
		return c, fmt.Errorf("--replay-keys must be from 1 to %d", benchMaxReplayKeys)
	}
	if c.Scenario == "sqlite-insert" {
		return c, nil
	}
	if c.Scenario == "deliver" {
		if c.Rate <= 0 || c.Rate > 10_000 {
			return c, errors.New("--rate must be above 0 and at most 10000")
		}
		if _, err := loopbackBase("http://" + c.Receiver); err != nil || strings.Contains(c.Receiver, "/") {
			return c, fmt.Errorf("--receiver %q: give a loopback host:port such as 127.0.0.1:18301", c.Receiver)
		}
	}
	if c.Token == "" {
		return c, errors.New("--token (or APPROVALS_TOKEN) is required: create one with approvals token create --name bench")
	}
	if c.Tool == "" {
		c.Tool = "bench_unregistered"
		switch c.Scenario {
		case "claim":
			c.Tool = "bench_exactly_once"
		case "deliver":
			c.Tool = "bench_notify"
		}
	}
	if !strings.HasPrefix(c.Path, "/") {
		return c, errors.New("--path must start with /")
	}
	base, err := loopbackBase(c.URL)
	if err != nil {
		return c, err
	}
	c.URL = base
	return c, nil
}

// loopbackBase checks that raw is an http URL of a loopback host and returns
// it without a trailing slash.
func loopbackBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("--url %q: give a plain http URL (bench does not speak TLS) such as http://127.0.0.1:8080", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--url %q: give the server's base URL only", raw)
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("--url %q: bench only drives a server on a loopback address (127.0.0.1, ::1 or localhost)", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// percentile is the nearest-rank percentile of sorted durations (0 when empty).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// latencySummary is what bench prints for one series of latencies.
type latencySummary struct {
	N                  int
	P50, P95, P99, Max time.Duration
}

func summarize(lat []time.Duration) latencySummary {
	s := slices.Clone(lat)
	slices.Sort(s)
	out := latencySummary{N: len(s), P50: percentile(s, 50), P95: percentile(s, 95), P99: percentile(s, 99)}
	if len(s) > 0 {
		out.Max = s[len(s)-1]
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// benchWorker is one client's tally.
type benchWorker struct {
	ops      int
	requests int
	errors   int
	lat      []time.Duration // one per successful operation
	submit   []time.Duration // claim: the submission step of each cycle
	samples  []string
}

func (w *benchWorker) fail(format string, args ...any) {
	w.errors++
	if len(w.samples) < 3 {
		w.samples = append(w.samples, fmt.Sprintf(format, args...))
	}
}

func submitBody(tool, key string, payload string) []byte {
	b, _ := json.Marshal(struct {
		Tool      string          `json:"tool"`
		Payload   json.RawMessage `json:"payload"`
		IntentKey string          `json:"intent_key"`
	}{tool, json.RawMessage(payload), key})
	return b
}

// payloadN is the JSON object {"n": n}, or {"client": i, "n": n} for i >= 0.
func payloadN(i, n int) string {
	if i < 0 {
		return `{"n":` + strconv.Itoa(n) + `}`
	}
	return `{"client":` + strconv.Itoa(i) + `,"n":` + strconv.Itoa(n) + `}`
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func benchCmd(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := parseBenchConfig(args)
	if err != nil {
		return err
	}
	switch cfg.Scenario {
	case "sweep":
		return benchSweep(ctx, cfg, stdout)
	case "sqlite-insert":
		return benchSQLiteInsert(ctx, cfg, stdout)
	case "floor-server":
		return benchFloorServe(ctx, cfg.Addr, stdout)
	}
	switch cfg.Scenario {
	case "waiters":
		return benchWaiters(ctx, cfg, stdout)
	case "deliver":
		return benchDeliver(ctx, cfg, stdout)
	}
	return benchCmdLoad(ctx, cfg, stdout)
}

// benchCmdLoad runs the load scenarios (new, replay, claim, list).
func benchCmdLoad(ctx context.Context, cfg benchConfig, stdout io.Writer) error {
	client, err := newBenchClient(cfg)
	if err != nil {
		return err
	}
	defer client.close()
	run := newRunID()

	// Check the target and the token once before measuring.
	status, body, err := client.do(ctx, http.MethodGet, "/api/v1/tools", nil, "")
	if err != nil {
		return fmt.Errorf("reach %s: %w", cfg.URL, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET /api/v1/tools answered %d: %s", status, snippet(body))
	}

	var replayKeys []string
	if cfg.Scenario == "replay" {
		if replayKeys, err = holdIntents(ctx, cfg, run); err != nil {
			return err
		}
	}

	workers := make([]*benchWorker, cfg.Clients)
	var (
		wg     sync.WaitGroup
		budget atomic.Int64 // operations left
	)
	budget.Store(int64(cfg.MaxRequests))
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Now().Add(cfg.Duration)
	start := time.Now()
	for i := range workers {
		w := &benchWorker{lat: make([]time.Duration, 0, 4096)}
		workers[i] = w
		client, err := newBenchClient(cfg)
		if err != nil {
			return err
		}
		wg.Go(func() {
			defer client.close()
			for n := 0; time.Now().Before(deadline) && rctx.Err() == nil; n++ {
				if budget.Add(-1) < 0 {
					return
				}
				switch cfg.Scenario {
				case "new":
					key := "bench:" + run + ":new:" + strconv.Itoa(i) + ":" + strconv.Itoa(n)
					benchSubmit(rctx, client, w, cfg.Tool, key, payloadN(i, n), http.StatusCreated)
				case "replay":
					k := (i + n*cfg.Clients) % len(replayKeys)
					benchSubmit(rctx, client, w, cfg.Tool, replayKeys[k], payloadN(-1, k), http.StatusOK)
				case "claim":
					benchClaim(rctx, client, w, cfg.Tool, fmt.Sprintf("bench:%s:claim:%d:%d", run, i, n), i, n)
				case "list":
					benchGet(rctx, client, w, cfg.Path)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	printBench(stdout, cfg, workers, elapsed)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("150405") + hex.EncodeToString(b[:])
}

// holdIntents submits the replay scenario's intents (untimed) so that the
// measured phase sees only replays.
func holdIntents(ctx context.Context, cfg benchConfig, run string) ([]string, error) {
	keys := make([]string, cfg.ReplayKeys)
	for k := range keys {
		keys[k] = fmt.Sprintf("bench:%s:replay:%d", run, k)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	next := make(chan int)
	go func() {
		defer close(next)
		for k := range keys {
			select {
			case next <- k:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range cfg.Clients {
		client, err := newBenchClient(cfg)
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			defer client.close()
			for k := range next {
				status, body, err := client.do(ctx, http.MethodPost, "/api/v1/actions", submitBody(cfg.Tool, keys[k], payloadN(-1, k)), "")
				if err == nil && (status == http.StatusCreated || status == http.StatusOK) {
					continue
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err.Error())
				} else {
					errs = append(errs, fmt.Sprintf("%d %s", status, snippet(body)))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("hold %d intents for replay: %d failed, first: %s", len(keys), len(errs), errs[0])
	}
	return keys, ctx.Err()
}

func benchSubmit(ctx context.Context, client *benchClient, w *benchWorker, tool, key, payload string, want int) {
	t0 := time.Now()
	status, body, err := client.do(ctx, http.MethodPost, "/api/v1/actions", submitBody(tool, key, payload), "")
	d := time.Since(t0)
	w.requests++
	if err != nil {
		if ctx.Err() == nil {
			w.fail("submit: %v", err)
		}
		return
	}
	if status != want {
		w.fail("submit answered %d, want %d: %s", status, want, snippet(body))
		return
	}
	w.ops++
	w.lat = append(w.lat, d)
}

func benchClaim(ctx context.Context, client *benchClient, w *benchWorker, tool, key string, i, n int) {
	t0 := time.Now()
	status, body, err := client.do(ctx, http.MethodPost, "/api/v1/actions", submitBody(tool, key, payloadN(i, n)), "")
	ds := time.Since(t0)
	w.requests++
	if err != nil {
		if ctx.Err() == nil {
			w.fail("submit: %v", err)
		}
		return
	}
	var a struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if status != http.StatusCreated || json.Unmarshal(body, &a) != nil || a.State != string(queue.StateInProgress) {
		w.fail("submit answered %d (want 201 in_progress; is %s an exactly-once tool without an intent template?): %s", status, tool, snippet(body))
		return
	}
	w.submit = append(w.submit, ds)
	status, body, err = client.do(ctx, http.MethodPost, "/api/v1/actions/"+url.PathEscape(a.ID)+"/complete", []byte(`{"result":{"ok":true}}`), "")
	d := time.Since(t0)
	w.requests++
	if err != nil {
		if ctx.Err() == nil {
			w.fail("complete: %v", err)
		}
		return
	}
	if status != http.StatusOK {
		w.fail("complete answered %d, want 200: %s", status, snippet(body))
		return
	}
	w.ops++
	w.lat = append(w.lat, d)
}

func benchGet(ctx context.Context, client *benchClient, w *benchWorker, path string) {
	t0 := time.Now()
	status, body, err := client.do(ctx, http.MethodGet, path, nil, "")
	d := time.Since(t0)
	w.requests++
	if err != nil {
		if ctx.Err() == nil {
			w.fail("get: %v", err)
		}
		return
	}
	if status != http.StatusOK {
		w.fail("GET %s answered %d: %s", path, status, snippet(body))
		return
	}
	w.ops++
	w.lat = append(w.lat, d)
}

func printBench(out io.Writer, cfg benchConfig, workers []*benchWorker, elapsed time.Duration) {
	var (
		ops, reqs, errs int
		lat, sub        []time.Duration
		samples         []string
	)
	for _, w := range workers {
		ops += w.ops
		reqs += w.requests
		errs += w.errors
		lat = append(lat, w.lat...)
		sub = append(sub, w.submit...)
		samples = append(samples, w.samples...)
	}
	secs := elapsed.Seconds()
	opName := map[string]string{"new": "submissions", "replay": "replays", "claim": "claim+complete cycles",
		"list": "reads", "sqlite-insert": "inserts"}[cfg.Scenario]
	s := summarize(lat)
	target, what := cfg.URL, "tool "+cfg.Tool
	switch cfg.Scenario {
	case "list":
		what = "GET " + cfg.Path
	case "sqlite-insert":
		target, what = cfg.DatabaseURL, "table "+cfg.Table
	}
	fmt.Fprintf(out, "scenario %s: %s, %d clients, %.1fs, %s\n", cfg.Scenario, target, cfg.Clients, secs, what)
	fmt.Fprintf(out, "  %d %s (%.1f/s), %d requests (%.1f/s), %d errors\n", ops, opName, float64(ops)/secs, reqs, float64(reqs)/secs, errs)
	fmt.Fprintf(out, "  latency ms: p50 %s  p95 %s  p99 %s  max %s\n", ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max))
	if cfg.Scenario == "claim" {
		ss := summarize(sub)
		fmt.Fprintf(out, "  submit step ms: p50 %s  p95 %s  p99 %s  max %s\n", ms(ss.P50), ms(ss.P95), ms(ss.P99), ms(ss.Max))
	}
	for _, e := range samples {
		fmt.Fprintf(out, "  error: %s\n", e)
	}
	// One line for scripts.
	fmt.Fprintf(out, "summary scenario=%s clients=%d seconds=%.2f ops=%d ops_per_s=%.1f requests=%d requests_per_s=%.1f errors=%d p50_ms=%s p95_ms=%s p99_ms=%s max_ms=%s\n",
		cfg.Scenario, cfg.Clients, secs, ops, float64(ops)/secs, reqs, float64(reqs)/secs, errs, ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max))
}

// benchSweep times the server's own sweep (expiry and stale-claim tickets)
// on the given storage: its cost should not grow with the number of stored
// actions.
func benchSweep(ctx context.Context, cfg benchConfig, out io.Writer) error {
	st, where, err := app.OpenStore(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	sweeper := maintenance.NewSweeper(queue.NewService(st, classify.Empty(), queue.Options{}), st, nil)
	lat := make([]time.Duration, 0, cfg.Rounds)
	var expired, tickets int
	for range cfg.Rounds {
		t0 := time.Now()
		res, err := sweeper.Sweep(ctx)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		lat = append(lat, time.Since(t0))
		expired += len(res.Expired)
		tickets += len(res.Tickets)
	}
	s := summarize(lat)
	fmt.Fprintf(out, "scenario sweep: %s, %d rounds, %d expired, %d stale tickets opened\n", where, cfg.Rounds, expired, tickets)
	fmt.Fprintf(out, "  latency ms: p50 %s  p95 %s  p99 %s  max %s\n", ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max))
	fmt.Fprintf(out, "summary scenario=sweep rounds=%d expired=%d tickets=%d p50_ms=%s p95_ms=%s p99_ms=%s max_ms=%s\n",
		cfg.Rounds, expired, tickets, ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max))
	return nil
}
