package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/queue"
)

// submit is the call of a guarded tool: it submits the arguments (without
// intent_key, otherwise as the client wrote them) as the payload of an
// action, as the calling agent.
func (s *server) submit(tool string) mcp.ToolHandler {
	return s.handle(func(ctx context.Context, agent string, raw json.RawMessage) (*mcp.CallToolResult, error) {
		sub, err := decodeSubmission(raw, s.maxBody)
		if err != nil {
			return nil, err
		}
		res, err := s.svc.Submit(ctx, queue.SubmitRequest{
			Tool: tool, Payload: sub.Payload, IntentKey: sub.IntentKey, Agent: agent, Channel: Channel,
			TokenHash: queue.TokenGuard(ctx), Plan: sub.Plan})
		if err != nil {
			return nil, err
		}
		if res.Action.Spec.Upstream != "" {
			return upstreamAnswer(res, agent)
		}
		return answer(res.Action, submitted(res, agent))
	}, true)
}
