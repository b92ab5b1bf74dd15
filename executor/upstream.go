package executor

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/upstream"
)

// Upstreams calls one tool of one upstream MCP server once:
// (*upstream.Manager).Call.
type Upstreams interface {
	Call(ctx context.Context, upstream, tool string, args json.RawMessage) upstream.Outcome
}

// UpstreamCall performs an action through its upstream MCP tool. It is the
// Call of the Upstream executor and the queue.UpstreamCaller with which
// the Service runs at-least-once and exactly-once calls within their
// submission.
type UpstreamCall struct{ Upstreams Upstreams }

// Channel names the upstream executor in events.
func (UpstreamCall) Channel() string { return queue.UpstreamChannel }

// Target names the upstream and its tool (never the upstream's URL, which
// may carry a credential).
func (UpstreamCall) Target(a *queue.Action) map[string]any {
	return map[string]any{"upstream": a.Spec.Upstream, "upstream_tool": a.Spec.UpstreamTool}
}

// CallUpstream is Do, for queue.UpstreamCaller.
func (c UpstreamCall) CallUpstream(a *queue.Action) queue.Execution { return c.Do(a) }

// Do calls the upstream tool once with the action's arguments: the
// approved payload once a person approved it, else the payload. It is
// bounded by the upstream's timeout, not by any caller's context, so a
// call under way finishes during shutdown.
func (c UpstreamCall) Do(a *queue.Action) queue.Execution {
	args := a.ApprovedPayload
	if args == nil {
		args = a.Payload
	}
	out := c.Upstreams.Call(context.Background(), a.Spec.Upstream, a.Spec.UpstreamTool, args)
	info := c.Target(a)
	if out.Error != "" {
		info["error"] = out.Error
	}
	var result json.RawMessage
	if len(out.Result) > 0 {
		// Storable as the stores require (no NUL, valid UTF-8, at most
		// MaxResultBody), like a webhook's answer.
		result = responseResult(out.Result)
	}
	switch out.Kind {
	case upstream.Done:
		return queue.Execution{Outcome: queue.ExecutionDone, Result: result, Details: info}
	case upstream.Failed:
		if result != nil {
			info["result"] = result
		}
		return queue.Execution{Outcome: queue.ExecutionFailed, Result: result, Error: out.Error, Details: info}
	case upstream.NotSent:
		info["note"] = "nothing was sent to the upstream"
		return queue.Execution{Outcome: queue.ExecutionFailed, Error: "not sent: " + out.Error, Details: info}
	}
	// Unknown: a timeout, a lost connection, a crashed process.
	return queue.Execution{Outcome: queue.ExecutionUnknown, Error: out.Error, Details: info}
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

// NewUpstream returns the executor of approved upstream actions of svc.
func NewUpstream(svc *queue.Dispatch, ups Upstreams, cfg UpstreamConfig) *Upstream {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = 10 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	l := newLoop(svc, cfg.Logger, UpstreamCall{Upstreams: ups},
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
