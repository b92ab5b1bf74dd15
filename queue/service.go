package queue

import (
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
	reg   atomic.Pointer[classify.Registry]
	now   func() time.Time
	log   *slog.Logger
	opts  Options
	// polls are the long-polls under way (the approvals_waiters gauge),
	// woken when Options.Done closes.
	polls pollSet
	// upstreamCalls are the upstream calls submissions are making
	// (WaitUpstreamCalls).
	upstreamCalls sync.WaitGroup
	// waiterPool caps concurrent long-polls of agents
	// (APPROVALS_MAX_WAITERS), streamPool the dashboard's event streams
	// (APPROVALS_MAX_STREAMS).
	waiterPool, streamPool *waiterPool
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
	// WaitRecheck is the slow timed re-read of a long-poll, a last resort
	// for a lost notification: a store wakes every long-poll itself when it
	// may have lost changes (PostgreSQL's listener reconnecting). Default
	// 15s; each recheck is a read, and at 2s ten thousand long-polls made
	// 5,000 reads a second.
	WaitRecheck time.Duration
	// Verifier asks a tool's system of record whether an action's effect
	// happened (section 18); nil: no verifier is asked.
	Verifier VerifyAsker
	// OnVerified observes every verifier check's verdict, for metrics.
	OnVerified func(tool, verdict string)
	// Waiters cap concurrent long-polls of agents (REST ?wait, MCP waits).
	Waiters WaiterLimits
	// MaxStreams caps the dashboard's event streams, a pool apart
	// (APPROVALS_MAX_STREAMS; default DefaultMaxStreams).
	MaxStreams int
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
	// Done is closed when the process begins to shut down: every
	// long-poll then answers at once with the current state of its action.
	Done <-chan struct{}
}

// NewService returns a Service over store with the tools of reg.
func NewService(store Store, reg *classify.Registry, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.WaitRecheck <= 0 {
		opts.WaitRecheck = 15 * time.Second
	}
	if reg == nil {
		reg = classify.Empty()
	}
	s := &Service{store: store, now: opts.Now, log: opts.Logger, opts: opts, approvedAtSubmission: NewHub(),
		keep:       newOutcomeKeeper(opts.Logger),
		waiterPool: newWaiterPool(opts.Waiters), streamPool: newWaiterPool(StreamLimits(opts.MaxStreams))}
	if opts.MaxUpstreamCalls <= 0 {
		opts.MaxUpstreamCalls = DefaultMaxUpstreamCalls
	}
	s.opts.MaxUpstreamCalls = opts.MaxUpstreamCalls
	s.upstreamSlots = make(chan struct{}, opts.MaxUpstreamCalls)
	s.reg.Store(reg)
	if opts.Done != nil {
		go func() {
			<-opts.Done
			s.polls.stop()
		}()
	}
	return s
}

// Registry returns the current tools.
func (s *Service) Registry() *classify.Registry { return s.reg.Load() }

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
