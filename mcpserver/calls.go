package mcpserver

import (
	"context"
	"encoding/json"
	"runtime/debug"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
)

// call is the shape of every tool's work: the calling agent and the raw
// arguments in, a result or an error out. Errors become isError results.
type call func(ctx context.Context, agent string, raw json.RawMessage) (*mcp.CallToolResult, error)

// argumentsCall is the work of a read or drive tool, on decoded arguments.
type argumentsCall func(ctx context.Context, agent string, args arguments) (*mcp.CallToolResult, error)

// handle wraps a call with what every tool needs: the caller, and a refusal
// the model can read for every error. A guarded call (a submission, a drive
// call) acts through a statement that checks a token taken from the cache
// (caller); any other call comes after the token's lookup (tokenCheck).
func (s *server) handle(c call, guarded bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		// The SDK runs handlers on its own goroutines without recovering, so
		// a panic here would end the process, not just the call.
		defer func() {
			if p := recover(); p != nil {
				s.log.ErrorContext(ctx, "mcp: call panicked", "tool", req.Params.Name, "panic", p, "stack", string(debug.Stack()))
				res, err = s.refuse(ctx, &queue.Error{Code: queue.CodeInternal, Detail: "internal error; it has been logged"}, "")
			}
		}()
		// The caller's trace: _meta's traceparent, the MCP way of carrying
		// it, wins over the HTTP request's.
		ctx, span := tracing.Start(tracing.ExtractMap(ctx, req.Params.Meta), "tools/call "+req.Params.Name,
			trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if span.IsRecording() {
			span.SetAttributes(attribute.String("mcp.method.name", "tools/call"),
				attribute.String("gen_ai.operation.name", "execute_tool"),
				attribute.String("gen_ai.tool.name", req.Params.Name))
			if req.Session != nil {
				span.SetAttributes(attribute.String("mcp.session.id", req.Session.ID()))
			}
			// The agent's name for its tool call: _meta's, else the HTTP
			// request's X-Tool-Call-Id (MCP has no id of its own for it).
			id, _ := req.Params.Meta[tracing.ToolCallIDMeta].(string)
			if id == "" && req.Extra != nil {
				id = req.Extra.Header.Get(tracing.ToolCallIDHeader)
			}
			if id != "" {
				ctx = tracing.WithToolCallID(ctx, id)
				span.SetAttributes(attribute.String("gen_ai.tool.call.id", tracing.ToolCallID(ctx)))
			}
		}
		agent, ok := agentOf(req)
		ca := callerOf(req)
		if !ok || ca == nil { // authenticate runs first, so this cannot happen
			return s.refuse(ctx, queue.Errorf(queue.CodeUnauthorized, "send an agent token as Authorization: Bearer TOKEN"), "")
		}
		guard := ""
		if guarded {
			guard = ca.guard()
		}
		if guard != "" {
			ctx = queue.WithTokenGuard(ctx, guard)
		}
		res, err = c(ctx, agent, req.Params.Arguments)
		ca.settle(guard, err)
		if err != nil {
			if span.IsRecording() {
				span.SetAttributes(attribute.String("error.type", errorType(err)))
				span.SetStatus(codes.Error, "")
			}
			return s.refuse(ctx, err, agent)
		}
		return res, nil
	}
}

// withArguments applies the argument checks of the REST API before a read
// or drive tool's work.
func (s *server) withArguments(c argumentsCall) call {
	return func(ctx context.Context, agent string, raw json.RawMessage) (*mcp.CallToolResult, error) {
		args, err := decodeArguments(raw, s.maxBody)
		if err != nil {
			return nil, err
		}
		return c(ctx, agent, args)
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// errorType is a refusal's code for a span's error.type, "_OTHER" when it
// has none.
func errorType(err error) string {
	if code := queue.ErrorCode(err); code != "" {
		return string(code)
	}
	return "_OTHER"
}
