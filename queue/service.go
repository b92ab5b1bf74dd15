package queue

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/approvals/approvals/classify"
)

// Service is the one implementation of every rule of the product; the REST
// API, the MCP endpoint and the dashboard all call it.
type Service struct {
	store Store
	tools *CurrentTools
	now   func() time.Time
	log   *slog.Logger
	opts  Options
	// upstreamCalls are the upstream calls submissions are making
	// (Shutdown waits for them).
	upstreamCalls sync.WaitGroup
	// upstreamSlots caps the upstream calls submissions make at once.
	upstreamSlots chan struct{}
	// approvedAtSubmission announces, in this process only, the actions a
	// submission stored already approved (by a rule, a grant or a plan)
	// that a server executor performs. Stores notify state changes, and
	// an insert is none, so without it such an action waited for the
	// executors' slow rescan (p50 about 9 s) while a person's approval
	// was delivered in milliseconds.
	approvedAtSubmission *Hub
	// keep holds the outcomes learnt while the database did not answer.
	keep *outcomeKeeper
}

// Options configure a Service.
type Options struct {
	// Now is the clock; tests inject one. Default time.Now.
	Now func() time.Time
	// Logger, default slog.Default().
	Logger *slog.Logger
	// OnSubmit observes every submission's class and outcome (created,
	// replayed, intent_key_reused, in_progress, refused), for metrics.
	OnSubmit func(class classify.Class, outcome string)
	// OnPolicy observes every decision made at submission: a policy rule's
	// (decision approve, reject or human) or a grant's (rule "", decision
	// grant), for metrics.
	OnPolicy func(tool, rule, decision string)
	// OnEvents is called after a submission committed a new action whose
	// events a channel hears of (its submitted event, a rule's decision, a
	// grant's approval): a change no state-change notification announces.
	// The process's outbox wakes on it instead of waiting for its poll.
	// It must not block.
	OnEvents func()
	// Tools holds the tools in force; NewService stores reg in it (in a
	// new one when nil). Whoever keeps it (the gateway, which re-imports
	// upstream tools) replaces the tools with its Store.
	Tools *CurrentTools
	// Verifier asks a tool's system of record whether an action's effect
	// happened (section 18); nil: no verifier is asked.
	Verifier VerifyAsker
	// OnVerified observes every verifier check's verdict, for metrics.
	OnVerified func(tool, verdict string)
	// OnTicketResolved observes every committed resolution of a ticket, by
	// ResolvedByVerifier, ResolvedByOperator or ResolvedByAgent, for
	// metrics: once per ticket, after the store wrote it.
	OnTicketResolved func(by string)
	// MaxUpstreamCalls caps the upstream calls submissions make at once
	// (APPROVALS_MAX_UPSTREAM_CALLS; default DefaultMaxUpstreamCalls).
	MaxUpstreamCalls int
	// Upstream calls the upstream MCP tool of an action (the gateway);
	// without it, tools executed upstream are refused as unavailable.
	Upstream UpstreamCaller
	// Staff tells the rules of deciding what they know of a person beyond
	// the email (their identity provider groups); nil: nothing, so only
	// the emails of the tools file's groups count.
	Staff StaffDirectory
}

// NewService returns a Service over store with the tools of reg.
func NewService(store Store, reg *classify.Registry, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if reg == nil {
		reg = classify.Empty()
	}
	if opts.Tools == nil {
		opts.Tools = &CurrentTools{}
	}
	s := &Service{store: store, tools: opts.Tools, now: opts.Now, log: opts.Logger, opts: opts, approvedAtSubmission: NewHub(),
		keep: newOutcomeKeeper(opts.Logger)}
	if opts.MaxUpstreamCalls <= 0 {
		opts.MaxUpstreamCalls = DefaultMaxUpstreamCalls
	}
	s.opts.MaxUpstreamCalls = opts.MaxUpstreamCalls
	s.upstreamSlots = make(chan struct{}, opts.MaxUpstreamCalls)
	s.tools.Store(reg)
	return s
}

// Registry returns the current tools.
func (s *Service) Registry() *classify.Registry { return s.tools.Load() }

// CurrentTools holds the tools in force: every submission reads them, and a
// gateway replaces them whole when an upstream's tools change. The zero
// value holds none.
type CurrentTools struct {
	p atomic.Pointer[classify.Registry]
}

// Load returns the tools in force.
func (t *CurrentTools) Load() *classify.Registry { return t.p.Load() }

// Store puts reg in force for every submission that begins after it, as a
// re-import of the upstreams' tool lists does. Actions keep the snapshot
// they were submitted with.
func (t *CurrentTools) Store(reg *classify.Registry) { t.p.Store(reg) }

// Shutdown finishes what submissions began before the store closes (on
// SIGTERM, after the HTTP server stopped waiting for its requests and the
// deliveries have finished). It waits for the upstream calls submissions
// started and their records, so that a call under way is recorded rather
// than left to become a ticket; then it tries every outcome kept while the
// database did not answer once more, and waits for the tries at most
// flushTimeout, or until ctx ends.
func (s *Service) Shutdown(ctx context.Context) {
	s.upstreamCalls.Wait()
	fctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	s.keep.flush(fctx)
}

// flushTimeout bounds the last tries of the kept outcomes at shutdown.
const flushTimeout = 10 * time.Second

// Now returns the service clock's time in UTC, truncated to microseconds
// (what PostgreSQL keeps), so what is returned equals what is stored.
func (s *Service) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// ValidID reports whether s has the layout of the ids NewID makes, so a
// malformed id is "not found" or invalid_request, never a database error.
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// Plans are the operations on plans (docs/plans.md): one decision
// for a piece of work.
type Plans struct{ s *Service }

// Plans returns the operations on plans.
func (s *Service) Plans() Plans { return Plans{s} }

// Tickets are the operations on reconciliation tickets: an operator's
// finding, and the verifiers that ask the system of record (section 18).
type Tickets struct{ s *Service }

// Tickets returns the operations on tickets.
func (s *Service) Tickets() Tickets { return Tickets{s} }
