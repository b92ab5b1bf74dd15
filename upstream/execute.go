package upstream

import (
	"context"
	"encoding/json"

	"github.com/approvals/approvals/queue"
)

// CallUpstream implements queue.UpstreamCaller, the domain's port for
// upstream calls: it calls the action's upstream tool once with the
// action's arguments (the approved payload once a person approved it, else
// the payload) and says what came of it. It is bounded by the upstream's
// timeout, not by any caller's context, so a call under way finishes
// during shutdown; ctx passes on only its trace (the call's _meta
// traceparent).
func (m *Manager) CallUpstream(ctx context.Context, a *queue.Action) queue.Execution {
	args := a.ApprovedPayload
	if args == nil {
		args = a.Payload
	}
	out := m.Call(context.WithoutCancel(ctx), a.Spec.Upstream, a.Spec.UpstreamTool, args)
	info := queue.UpstreamTarget(a)
	if out.Error != "" {
		info["error"] = out.Error
	}
	var result json.RawMessage
	if len(out.Result) > 0 {
		// Storable as the stores require (no NUL, valid UTF-8, at most
		// MaxResultBody), like a webhook's answer.
		result = queue.ResultOf(out.Result)
	}
	switch out.Kind {
	case Done:
		return queue.Execution{Outcome: queue.ExecutionDone, Result: result, Details: info}
	case Failed:
		if result != nil {
			info["result"] = result
		}
		return queue.Execution{Outcome: queue.ExecutionFailed, Result: result, Error: out.Error, Details: info}
	case NotSent:
		info["note"] = "nothing was sent to the upstream"
		return queue.Execution{Outcome: queue.ExecutionFailed, Error: "not sent: " + out.Error, Details: info}
	}
	// Unknown: a timeout, a lost connection, a crashed process.
	return queue.Execution{Outcome: queue.ExecutionUnknown, Error: out.Error, Details: info}
}
