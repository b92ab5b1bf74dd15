package apptest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/sqlite"
	"github.com/approvals/approvals/storage"
)

// EnvOptions change what NewEnv opens; the zero value is a PostgreSQL
// schema with the tools of tools.example.yaml and a running clock.
type EnvOptions struct {
	// SQLite opens a fresh SQLite file instead of a PostgreSQL schema.
	SQLite bool
	// DatabaseURL opens this PostgreSQL database (a deployment's) instead
	// of a fresh schema.
	DatabaseURL string
	// Tools are the registered tools; default tools.example.yaml.
	Tools *classify.Registry
	// Clock is the service clock; default testclock.Running().
	Clock *testclock.Clock
	// Service are the service's options. Now is always Clock.Now.
	Service queue.Options
	// WaitRecheck is the long-polls' fallback re-read; zero is one minute,
	// longer than any test's wait, so that a long-poll ends only when the
	// change notification itself wakes it.
	WaitRecheck time.Duration
	// WrapStore wraps what the service uses (a spy or an injected fault).
	WrapStore func(queue.Store) queue.Store
}

// Env is storage and a queue.Service over it, as one server process holds
// them, with neither HTTP nor background workers: the harness of the
// domain, executor and maintenance tests, which drive the sweeper and the
// outbox by hand at a moment of their choosing. Start is the harness of
// the whole process.
type Env struct {
	// Store is the storage, unwrapped.
	Store   storage.Store
	Service *queue.Service
	// Polls are the process's long-polls, over the same store.
	Polls *longpoll.Polls
	// Tools are the tools the service started with; CurrentTools holds
	// the tools in force, which a test may replace.
	Tools        *classify.Registry
	CurrentTools *queue.CurrentTools
	Clock        *testclock.Clock
	// DatabaseURL is the PostgreSQL database ("" on SQLite) and SQLitePath
	// the SQLite file ("" on PostgreSQL): AddProcess opens them again.
	DatabaseURL string
	SQLitePath  string

	// T is the test the Env belongs to.
	T testing.TB

	opts     EnvOptions
	store    queue.Store // what the service uses: Store, wrapped
	done     chan struct{}
	stopOnce sync.Once
}

// NewEnv opens fresh storage and a service over it; t.Cleanup releases the
// service's long-polls and closes the storage.
func NewEnv(t testing.TB, opts EnvOptions) *Env {
	t.Helper()
	opts.Tools, opts.Clock = toolsAndClock(t, opts.Tools, opts.Clock)
	e := &Env{Tools: opts.Tools, Clock: opts.Clock, T: t, opts: opts}
	switch {
	case opts.SQLite:
		e.SQLitePath = filepath.Join(t.TempDir(), "approvals.db")
	case opts.DatabaseURL != "":
		e.DatabaseURL = opts.DatabaseURL
	default:
		e.DatabaseURL = pgtest.URL(t)
	}
	e.open()
	return e
}

// DomainTools are the two tools of the domain tests, without schemas so
// that any payload with the intent's fields will do: send_customer_email
// (at-most-once, 10m claim_timeout, 1h expires_after) and issue_refund
// (exactly-once, 2m claim_timeout).
const DomainTools = `
tools:
  send_customer_email:
    class: at-most-once
    intent: "email:{customer_id}:{topic}"
    claim_timeout: 10m
    expires_after: 1h
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    claim_timeout: 2m
`

// DomainEnv is NewEnv on PostgreSQL with DomainTools and clock (nil: a
// running one).
func DomainEnv(t testing.TB, clock *testclock.Clock) *Env {
	t.Helper()
	return NewEnv(t, EnvOptions{Tools: ParseTools(t, DomainTools, classify.Options{}), Clock: clock})
}

// toolsAndClock are tools and clock, or the defaults of both harnesses:
// tools.example.yaml and a running clock.
func toolsAndClock(t testing.TB, tools *classify.Registry, clock *testclock.Clock) (*classify.Registry, *testclock.Clock) {
	if tools == nil {
		tools = ExampleTools(t)
	}
	if clock == nil {
		clock = testclock.Running()
	}
	return tools, clock
}

// OnBothStores runs fn as two parallel subtests, on SQLite and on
// PostgreSQL, each with an Env of its own.
func OnBothStores(t *testing.T, opts EnvOptions, fn func(t *testing.T, e *Env)) {
	t.Helper()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			o := opts
			o.SQLite = kind == "sqlite"
			if o.Clock != nil {
				// Each store's subtest moves a clock of its own.
				o.Clock = o.Clock.Clone()
			}
			fn(t, NewEnv(t, o))
		})
	}
}

// AddProcess opens the same database again, with its own connections (on
// PostgreSQL its own pool and LISTEN connection), and a service over it on
// the same clock and tools: another server process.
func (e *Env) AddProcess() *Env {
	e.T.Helper()
	return e.AddWrappedProcess(e.opts.WrapStore)
}

// AddWrappedProcess is AddProcess whose service uses wrap(store) (nil:
// the store itself) instead of the WrapStore option.
func (e *Env) AddWrappedProcess(wrap func(queue.Store) queue.Store) *Env {
	e.T.Helper()
	opts := e.opts
	opts.WrapStore = wrap
	other := &Env{Tools: e.Tools, Clock: e.Clock, DatabaseURL: e.DatabaseURL, SQLitePath: e.SQLitePath, T: e.T, opts: opts}
	other.open()
	return other
}

func (e *Env) open() {
	t := e.T
	t.Helper()
	if e.SQLitePath != "" {
		s, err := sqlite.Open(context.Background(), e.SQLitePath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		e.Store = s
	} else {
		e.Store = pgtest.OpenURL(t, e.DatabaseURL)
	}
	e.store = e.Store
	if e.opts.WrapStore != nil {
		e.store = e.opts.WrapStore(e.Store)
	}
	so := e.opts.Service
	so.Now = e.Clock.Now
	recheck := e.opts.WaitRecheck
	if recheck == 0 {
		recheck = time.Minute
	}
	if so.Staff == nil {
		// As in a server process: the accounts tell who is in which IdP group.
		so.Staff = storage.StaffDirectory{Accounts: e.Store}
	}
	e.done = make(chan struct{})
	if so.Tools == nil {
		so.Tools = &queue.CurrentTools{}
	}
	e.CurrentTools = so.Tools
	e.Service = queue.NewService(e.store, e.Tools, so)
	e.Polls = longpoll.New(e.store, longpoll.Options{WaitRecheck: recheck, Done: e.done})
	t.Cleanup(e.ReleaseWaits)
}

// ReleaseWaits begins this process's shutdown for the requests that wait:
// every long-poll answers now with the current state of its action.
func (e *Env) ReleaseWaits() { e.stopOnce.Do(func() { close(e.done) }) }

// Sweeper is a sweeper of this process, as the background one would run.
func (e *Env) Sweeper() *maintenance.Sweeper {
	return maintenance.NewSweeper(e.Service, e.store, nil)
}

// Outbox is a fan-out and sender of this process.
func (e *Env) Outbox(cfg maintenance.OutboxConfig) *maintenance.Outbox {
	return maintenance.NewOutbox(e.Service, e.store, cfg)
}

// Submit submits payload to tool as agent "bot" through this process and
// fails the test unless that creates an action.
func (e *Env) Submit(tool string, payload map[string]any) *queue.Action {
	e.T.Helper()
	return Submit(e.T, e.Service, tool, payload)
}

// EventCount counts the events of kind in the action's timeline.
func (e *Env) EventCount(id, kind string) int {
	e.T.Helper()
	return EventCount(e.T, e.Store, id, kind)
}

// Submit submits payload to tool as agent "bot" and fails the test unless
// that creates an action.
func Submit(t testing.TB, svc *queue.Service, tool string, payload map[string]any) *queue.Action {
	t.Helper()
	raw, _ := json.Marshal(payload)
	res, err := svc.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: raw, Agent: "bot"})
	if err != nil || !res.Created {
		t.Fatalf("submit %s %s: %v %+v", tool, raw, err, res)
	}
	return res.Action
}

// Approver is the staff member Approve decides as.
const Approver = "user:ann@example.com"

// Approve approves the action as Approver and fails the test unless that
// succeeds.
func Approve(t testing.TB, svc *queue.Service, id string) *queue.Action {
	t.Helper()
	res, err := svc.Decide(context.Background(), queue.DecideRequest{ID: id, To: queue.StateApproved, By: Approver})
	if err != nil {
		t.Fatalf("approve %s: %v", id, err)
	}
	return res.Action
}

// EventCount counts the events of kind in the action's timeline.
func EventCount(t testing.TB, st queue.Store, id, kind string) int {
	t.Helper()
	evs, err := st.EventList(context.Background(), queue.EventListParams{ActionID: id, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// AwaitWaiters returns once at least n long-polls of polls have subscribed,
// read their action and wait for a change (the approvals_waiters gauge);
// it fails the test after 30 s.
func AwaitWaiters(t testing.TB, polls *longpoll.Polls, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for polls.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d long-polls waiting after 30s, want %d", polls.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// ParseTools parses a tools file written in a test.
func ParseTools(t testing.TB, yaml string, opts classify.Options) *classify.Registry {
	t.Helper()
	reg, err := classify.Parse([]byte(yaml), opts)
	if err != nil {
		t.Fatalf("parse tools: %v", err)
	}
	return reg
}

// Deref is *p, or nil for a nil p, for a failure message.
func Deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// SealAll seals every event stored so far into the audit chain, as the
// sealer of a process would, and fails the test after 30 s. On PostgreSQL
// an event waits until every older transaction has ended, including other
// tests' on the same server.
func SealAll(t testing.TB, st audit.Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := audit.Seal(context.Background(), st, audit.SealParams{Holder: "apptest", Lease: time.Second, Limit: 1000}); err != nil {
			t.Fatalf("seal: %v", err)
		}
		n, err := st.AuditUnsealedCount(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events left unsealed after 30s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PolicyTools are the tools of the policy and grant tests: the example of
// docs/policies.md (send_customer_email with three rules and grants of
// at most 8h and 100 uses, issue_refund exactly-once with two), a tool
// without grants, one that needs two approvals, and an at-least-once one.
// The webhook channel ops-events hears of send_customer_email's events.
const PolicyTools = `
groups:
  support-leads: [ann@example.com, bob@example.com]
  account-managers: [cy@example.com]
  finance: [fin@example.com]
channels:
  ops-events: { webhook: "http://127.0.0.1:9/events", secret: channel-secret-1 }
tools:
  send_customer_email:
    intent: "email:{customer_id}:{topic}"
    approval:
      approvers: [support-leads]
      notify: [ops-events]
      policy:
        - name: internal-recipient
          when: 'payload.to.endsWith("@example.com")'
          decide: approve
        - name: legal-topics
          when: 'payload.topic in ["legal", "lawsuit"]'
          decide: reject
          note: "Legal topics go through the legal team."
        - name: vip-two-people
          when: 'payload.customer_id.startsWith("vip-")'
          decide: human
          required: 2
          approvers: [support-leads, account-managers]
      grants: { max: 8h, max_uses: 100 }
  issue_refund:
    class: exactly-once
    intent: "refund:{order_id}:{line_id}"
    approval:
      policy:
        - { name: large-refund, when: 'double(payload.amount) > 500.0', decide: human, approvers: [finance] }
        - { name: no-crypto, when: 'payload.currency == "BTC"', decide: reject, note: "No refunds in BTC." }
  post_update:
    intent: "post:{topic}"
    approval:
      grants: false
  quorum_mail:
    intent: "quorum:{id}"
    approval:
      required: 2
      approvers: [support-leads]
  invalidate_cache:
    annotations: { idempotentHint: true }
`

// AddStaff creates the staff user email with role in st (a password user,
// now), unless one has the email already: a grant approves only while its
// granting user exists and may decide (queue.GranterStanding), so a test
// that grants as a user makes the user first.
func AddStaff(t testing.TB, st accounts.Store, email string, role accounts.Role) *accounts.User {
	t.Helper()
	if u, err := st.UserGetByEmail(context.Background(), email); err == nil {
		return u
	}
	now := time.Now().UTC()
	u, err := st.UserCreate(context.Background(), &accounts.User{Email: email, PasswordHash: "x", Role: role,
		CreatedAt: now, PasswordChangedAt: now})
	if err != nil {
		t.Fatalf("add staff %s: %v", email, err)
	}
	return u
}
