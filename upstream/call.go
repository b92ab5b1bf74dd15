package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/tracing"
)

// Kind is what is known of a call's effect.
type Kind string

const (
	// Done: the tool ran and answered; Outcome.Result holds its CallToolResult.
	Done Kind = "done"
	// Failed: the tool answered isError (Result holds the CallToolResult), or the upstream
	// answered a JSON-RPC error, so the tool did not run; Error holds the text.
	Failed Kind = "failed"
	// Unknown: the request may have reached the tool, but no answer came (timeout, lost
	// connection, crashed process). The effect may or may not have happened: never call
	// again automatically; leave the action for reconciliation.
	Unknown Kind = "unknown"
	// NotSent: nothing was sent (the upstream is down, or the arguments are not an object),
	// so the tool surely did not run.
	NotSent Kind = "not_sent"
)

// Outcome is the answer of one Call.
type Outcome struct {
	Kind   Kind
	Result json.RawMessage // the upstream's CallToolResult (content, structuredContent, isError) as JSON
	Error  string          // for Failed, Unknown and NotSent: what happened, in words
	// Unavailable marks a NotSent outcome whose upstream is down (the caller's refusal is
	// upstream_unavailable), as opposed to arguments no tool could take.
	Unavailable bool
}

// Call calls the tool of the upstream once with args (a JSON object), within the upstream's
// timeout, and classifies the answer. It never retries.
func (m *Manager) Call(ctx context.Context, upstream, tool string, args json.RawMessage) Outcome {
	out := m.call(ctx, upstream, tool, args)
	// Errors can quote the upstream's URL (a connection error does): the
	// text is stored on the action and shown to agents and staff. It is
	// the upstream's text, and may hold NUL characters, which the stores
	// cannot hold: they become U+FFFD, as in a stored result.
	out.Error = cutText(strings.ReplaceAll(classify.RedactURLsIn(out.Error), "\x00", "\uFFFD"), MaxErrorText)
	return out
}

// MaxErrorText caps the error text of an outcome (a tool's isError text, a JSON-RPC error's
// message), as results are capped at 64 KiB: it is the upstream's to choose, and is stored
// on the action, sent in events and shown on pages.
const MaxErrorText = 8 << 10

// cutText cuts s to at most max bytes at a character boundary, saying so.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = " … (cut at 8 KiB)"
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func (m *Manager) call(ctx context.Context, upstream, tool string, args json.RawMessage) (out Outcome) {
	c, ok := m.conns[upstream]
	if !ok {
		return Outcome{Kind: NotSent, Unavailable: true, Error: fmt.Sprintf("no upstream is named %q", upstream)}
	}
	var obj map[string]json.RawMessage
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return Outcome{Kind: NotSent, Error: "the arguments of an MCP tool call must be a JSON object"}
	}
	cs, down := c.current()
	if cs == nil {
		return Outcome{Kind: NotSent, Unavailable: true, Error: fmt.Sprintf("upstream %s is unavailable: %s", upstream, down)}
	}
	ctx, span := tracing.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"),
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", tool),
			attribute.String("approvals.upstream", upstream)))
	defer func() {
		span.SetAttributes(attribute.String("approvals.outcome", string(out.Kind)))
		if out.Kind != Done {
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if span.IsRecording() {
		// The upstream continues the trace: MCP carries it in _meta.
		params.Meta = mcp.Meta{}
		tracing.InjectMap(ctx, params.Meta)
	}
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	res, err := cs.CallTool(callCtx, params)
	if err != nil {
		return m.callError(c, cs, callCtx, ctx, err)
	}
	js, merr := json.Marshal(res)
	if merr != nil {
		// The tool ran; only our copy of its answer is lost.
		return Outcome{Kind: Unknown, Error: fmt.Sprintf("upstream %s tool %s answered, but the answer cannot be stored: %v", upstream, tool, merr)}
	}
	if res.IsError {
		return Outcome{Kind: Failed, Result: js, Error: resultText(res)}
	}
	return Outcome{Kind: Done, Result: js}
}

// Error codes the SDK makes up on our side of the connection; they say nothing about
// whether the upstream ran the tool.
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

func (m *Manager) callError(c *conn, cs *mcp.ClientSession, callCtx, ctx context.Context, err error) Outcome {
	name := c.cfg.Name
	var wire *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return Outcome{Kind: Unknown, Error: fmt.Sprintf("the call to upstream %s was abandoned (%v) before it answered", name, context.Cause(ctx))}
	case callCtx.Err() != nil:
		return Outcome{Kind: Unknown, Error: fmt.Sprintf("upstream %s did not answer within its timeout of %s", name, c.cfg.Timeout)}
	case errors.Is(err, mcp.ErrConnectionClosed):
		reportLost(c, cs)
		return Outcome{Kind: Unknown, Error: fmt.Sprintf("the connection to upstream %s was lost during the call: %v", name, err)}
	case errors.As(err, &wire) && wire.Code != codeClientClosing && wire.Code != codeServerClosing && wire.Code != codeRejected:
		// The upstream answered the request with an error: the tool did not run.
		return Outcome{Kind: Failed, Error: fmt.Sprintf("upstream %s answered with error %d: %s", name, wire.Code, wire.Message)}
	default:
		reportLost(c, cs)
		return Outcome{Kind: Unknown, Error: fmt.Sprintf("the call to upstream %s ended without an answer: %v", name, err)}
	}
}

// resultText joins the text content of a result, which is where a tool explains its error.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "the tool reported an error without text"
	}
	return strings.Join(parts, "\n")
}

// reportLost marks the upstream down at once, so that no other call is sent over the broken
// session, and tells the supervisor to reconnect.
func reportLost(c *conn, cs *mcp.ClientSession) {
	c.mu.Lock()
	if c.session == cs {
		c.session, c.down = nil, "connection lost during a call; reconnecting"
	}
	c.mu.Unlock()
	select {
	case c.lost <- cs:
	default: // a report is pending; the supervisor reconnects anyway
	}
}
