package app

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/upstream"
)

// Gateway holds a server process's connections to the upstream MCP servers
// of the tools file and keeps the service's registry in step with what
// they list: at start, and again whenever an upstream reconnects, goes
// down or changes its tool list.
type Gateway struct {
	file    *classify.Registry // the tools file as parsed, before any import
	Manager *upstream.Manager
	tools   atomic.Pointer[queue.CurrentTools]
	log     *slog.Logger
	mu      sync.Mutex         // one import at a time, so an older listing never wins
	current *classify.Registry // the last import; it carries the classes learnt in this process, which no re-list lowers
	// disabled are the verifiers whose upstream tool the last check found
	// missing or not read-only, with why (under mu).
	disabled map[string]string
}

// StartGateway connects to the file's upstreams (at most about the connect
// timeout; one that is down is listed as unavailable and retried in the
// background) and returns the registry with their tools imported. Tools of
// one name from two places are a startup error naming both. Without
// upstreams it returns file as it is and a nil gateway.
func StartGateway(ctx context.Context, file *classify.Registry, log *slog.Logger) (*Gateway, *classify.Registry, error) {
	if len(file.Upstreams()) == 0 {
		return nil, file, nil
	}
	g := &Gateway{file: file, log: log}
	g.Manager = upstream.Start(ctx, file.Upstreams(), upstream.Options{Logger: log, OnChange: g.reimport})
	reg, changes, err := file.Reimport(nil, g.Manager.Listings())
	if err != nil {
		_ = g.Manager.Close()
		return nil, nil, err
	}
	g.current = reg
	g.logChanges(changes)
	g.checkVerifiers(reg)
	for _, t := range reg.Tools() {
		if t.Unavailable != "" {
			log.Warn("upstream tool unavailable; calls are refused until it is listed", "tool", t.Name, "reason", t.Unavailable)
		}
	}
	return g, reg, nil
}

// Serve starts re-importing into tools, the service's tools in force; a
// change between StartGateway and now is picked up by the import this
// makes at once.
func (g *Gateway) Serve(tools *queue.CurrentTools) {
	g.tools.Store(tools)
	g.reimport()
}

// reimport imports the upstreams' current listings into the service. A
// listing that cannot be imported (a new tool whose name collides with
// another) keeps the previous tools, and says why.
func (g *Gateway) reimport() {
	tools := g.tools.Load()
	if tools == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	reg, changes, err := g.file.Reimport(g.current, g.Manager.Listings())
	if err != nil {
		g.log.Error("upstream tools changed but cannot be imported; keeping the previous tools", "err", err)
		return
	}
	g.current = reg
	g.logChanges(changes)
	g.checkVerifiers(reg)
	tools.Store(reg)
}

// checkVerifiers runs tools check's read-only check of the upstream
// verifiers against the listings as they are now (at start, and whenever
// an upstream connects or changes its list), and logs each verifier it
// disables loudly, once, and each it enables again. The refusal itself is
// made at every call (newApp's verifier.Config.Refuse), so a verifier is
// never called between a change of a listing and this log.
func (g *Gateway) checkVerifiers(reg *classify.Registry) {
	listings := g.Manager.Listings()
	now := map[string]string{}
	for _, t := range reg.Tools() {
		if t.Verify == nil || t.Verify.Upstream == "" {
			continue
		}
		if l, ok := listings[t.Verify.Upstream]; !ok || l.Unavailable != "" {
			// Down: nothing is called, and nothing is known until it lists again.
			if why, ok := g.disabled[t.Name]; ok {
				now[t.Name] = why
			}
			continue
		}
		if err := reg.VerifierUpstreamProblem(t.Name, listings); err != nil {
			now[t.Name] = err.Error()
			if g.disabled[t.Name] != err.Error() {
				g.log.Error("VERIFIER DISABLED: its upstream tool fails tools check; its checks answer unknown and it is never called until the upstream lists the tool read-only",
					"tool", t.Name, "upstream", t.Verify.Upstream, "upstream_tool", t.Verify.Tool, "err", err)
			}
		}
	}
	for name := range g.disabled {
		if _, still := now[name]; !still {
			g.log.Info("verifier enabled again: its upstream tool is listed read-only", "tool", name)
		}
	}
	g.disabled = now
}

// logChanges logs every tool an import added or removed and every class it changed.
func (g *Gateway) logChanges(changes []classify.ClassChange) {
	for _, c := range changes {
		switch {
		case c.From == "":
			g.log.Info("upstream tool imported", "tool", c.Tool, "class", c.To, "reason", c.Reason)
		case c.To == "":
			g.log.Warn("upstream tool no longer imported", "tool", c.Tool, "class", c.From)
		default:
			g.log.Warn("upstream tool's class changed", "tool", c.Tool, "from", c.From, "to", c.To, "reason", c.Reason)
		}
	}
}

// Close ends the upstream connections and stops stdio upstreams.
func (g *Gateway) Close() error {
	if g == nil {
		return nil
	}
	return g.Manager.Close()
}
