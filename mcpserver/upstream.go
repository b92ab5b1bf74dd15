package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// upstreamAnswer is the result of a call of a tool that approvals executes
// on an upstream MCP server: the upstream result's own content first, so
// the model reads the tool's output, then the paragraph saying what
// happened, and the action as structuredContent.
func upstreamAnswer(res queue.SubmitResult, agent string) (*mcp.CallToolResult, error) {
	out, err := answer(res.Action, upstreamSubmitted(res, agent))
	if err != nil {
		return nil, err
	}
	if len(res.Action.Result) > 0 {
		var up mcp.CallToolResult
		// A result that is not a CallToolResult (an operator's finding, say)
		// has no content to put first.
		if json.Unmarshal(res.Action.Result, &up) == nil && len(up.Content) > 0 {
			out.Content = append(up.Content, out.Content...)
		}
	}
	return out, nil
}

// upstreamSubmitted says what a call of an upstream tool did.
func upstreamSubmitted(res queue.SubmitResult, agent string) string {
	a := res.Action
	if res.Replayed || a.Gated() {
		// Nothing was called within the submission: it waits for an
		// approval, or a policy rule decided it.
		return submitted(res, agent)
	}
	where := fmt.Sprintf("upstream %s's tool %s", a.Spec.Upstream, a.Spec.UpstreamTool)
	var b strings.Builder
	if a.Class == classify.AtLeastOnce {
		// Done or failed, nothing is held: repeating the call is harmless.
		switch a.State {
		case queue.StateDone:
			fmt.Fprintf(&b, "approvals called %s at once for %s: it is done, and the tool's own output comes first in this result. "+
				"Repeating it is harmless: nothing is held.", where, describe(a))
		case queue.StateFailed:
			fmt.Fprintf(&b, "approvals called %s at once for %s and it failed: %s. Repeating it is harmless: nothing is held.",
				where, describe(a), strings.TrimSuffix(deref(a.Error), "."))
		default: // recorded: its outcome could not be stored
			fmt.Fprintf(&b, "approvals could not record an answer of %s for %s. Repeating it is harmless: nothing is held.", where, describe(a))
		}
		return b.String()
	}
	switch a.State {
	case queue.StateDone:
		fmt.Fprintf(&b, "approvals called %s once for %s: it is done, and the tool's own output comes first in this result. "+
			"Do not call it again for this intent.", where, describe(a))
	case queue.StateFailed:
		fmt.Fprintf(&b, "approvals called %s for %s and it failed: %s. The effect did not happen; the intent is free, so call %s again "+
			"only once the cause is fixed.", where, describe(a), strings.TrimSuffix(deref(a.Error), "."), a.Tool)
	case queue.StateInProgress:
		fmt.Fprintf(&b, "approvals called %s for %s, but no answer came, so the outcome is unknown. An operator will check the upstream "+
			"and settle it. Do not call the tool again, here or by other means; follow it with get_action (id %s, wait).", where, describe(a), a.ID)
	default:
		return submitted(res, agent)
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "no reason given"
	}
	return *s
}
