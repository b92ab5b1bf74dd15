package executor

import (
	"context"
	"log/slog"
	"time"

	"github.com/approvals/approvals/queue"
)

// upstreamCall performs an action through its upstream MCP tool with the
// domain's port (queue.UpstreamCaller, which upstream.Manager implements):
// the Call of the Upstream executor.
type upstreamCall struct{ caller queue.UpstreamCaller }

// Channel names the upstream executor in events.
func (upstreamCall) Channel() string { return queue.UpstreamChannel }

// Target names the upstream and its tool (never the upstream's URL, which
// may carry a credential).
func (upstreamCall) Target(a *queue.Action) map[string]any { return queue.UpstreamTarget(a) }

// Do calls the upstream tool once (queue.UpstreamCaller.CallUpstream).
func (c upstreamCall) Do(ctx context.Context, a *queue.Action) queue.Execution {
	return c.caller.CallUpstream(ctx, a)
}

// Upstream performs approved at-most-once actions of upstream tools: every
// server process runs one, beside the webhook dispatcher, with the same
// claim-first rules (the claim is committed before the call; nothing
// in_progress is ever called again).
type Upstream struct{ *loop }

// UpstreamConfig configures an Upstream executor.
type UpstreamConfig struct {
	Logger *slog.Logger
	// OnOutcome observes each call's outcome (done, failed, unknown).
	OnOutcome func(outcome string)
	// Recheck is the slow timed scan for approved actions whose
	// notification was missed, or whose upstream was down. Default 10s.
	Recheck time.Duration
	// Concurrency caps calls under way in this process. Default 32.
	Concurrency int
}

// NewUpstream returns the executor of approved upstream actions of svc,
// which calls them through caller.
func NewUpstream(svc *queue.Dispatch, caller queue.UpstreamCaller, cfg UpstreamConfig) *Upstream {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = 10 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	l := newLoop(svc, cfg.Logger, upstreamCall{caller: caller},
		func(a *queue.Action) bool { return a.Spec.Upstream != "" }, cfg.Recheck, cfg.Concurrency, cfg.OnOutcome)
	// An action whose upstream is down, or no longer lists its tool, stays
	// approved: claiming it would only make a call that cannot be sent.
	l.ready = func(a *queue.Action) bool {
		t, _ := svc.Registry().Lookup(a.Tool)
		return t.Upstream == a.Spec.Upstream && t.UpstreamTool == a.Spec.UpstreamTool && t.Unavailable == ""
	}
	return &Upstream{l}
}

// Run claims and calls approved upstream actions until ctx ends; see loop.
func (u *Upstream) Run(ctx context.Context) { u.loop.run(ctx) }

// Scan offers every approved upstream action once and waits for the calls
// it started.
func (u *Upstream) Scan(ctx context.Context) { u.loop.scanAll(ctx) }
