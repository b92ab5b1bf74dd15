package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/executor"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/upstream"
)

// countingUpstream is a Go SDK MCP server over Streamable HTTP whose tools
// count their calls: one per class, one that hangs until the caller gives
// up, and two that answer isError (one exactly-once, one at-least-once).
type countingUpstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	calls   map[string]int
	args    map[string][]string
	release chan struct{}
	// outage, when set, begins while pay_outage answers: the database goes
	// away between the upstream call and its record.
	outage *apptest.Outage
}

func newCountingUpstream(t *testing.T) *countingUpstream {
	t.Helper()
	u := &countingUpstream{calls: map[string]int{}, args: map[string][]string{}, release: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "counting", Version: "1"}, nil)
	no, yes := false, true
	schema := json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"},"to":{"type":"string"}}}`)
	add := func(name string, ann *mcp.ToolAnnotations, h func(ctx context.Context) *mcp.CallToolResult) {
		s.AddTool(&mcp.Tool{Name: name, Description: "The " + name + " tool.", InputSchema: schema, Annotations: ann},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				u.mu.Lock()
				u.calls[name]++
				u.args[name] = append(u.args[name], string(req.Params.Arguments))
				u.mu.Unlock()
				return h(ctx), nil
			})
	}
	ok := func(text string) func(context.Context) *mcp.CallToolResult {
		return func(context.Context) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: map[string]any{"ok": true}}
		}
	}
	add("pay", &mcp.ToolAnnotations{OpenWorldHint: &no}, ok("paid"))                                 // exactly-once
	add("sync", &mcp.ToolAnnotations{IdempotentHint: yes}, ok("synced"))                             // at-least-once
	add("find", &mcp.ToolAnnotations{ReadOnlyHint: yes}, func(context.Context) *mcp.CallToolResult { // at-least-once
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such order"}}}
	})
	add("send", nil, ok("sent"))                                                                        // at-most-once
	add("refuse", &mcp.ToolAnnotations{OpenWorldHint: &no}, func(context.Context) *mcp.CallToolResult { // exactly-once
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "card declined"}}}
	})
	add("refuse_nul", &mcp.ToolAnnotations{OpenWorldHint: &no}, func(context.Context) *mcp.CallToolResult { // exactly-once
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "card\x00declined"}}}
	})
	add("pay_outage", &mcp.ToolAnnotations{OpenWorldHint: &no}, func(ctx context.Context) *mcp.CallToolResult { // exactly-once
		u.outage.Begin()
		return ok("paid")(ctx)
	})
	add("hang", &mcp.ToolAnnotations{OpenWorldHint: &no}, func(ctx context.Context) *mcp.CallToolResult { // exactly-once
		select {
		case <-ctx.Done():
		case <-u.release:
		}
		return ok("late")(ctx)
	})
	u.srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(u.srv.Close)
	t.Cleanup(func() { close(u.release) }) // before Close: let a hanging handler end
	return u
}

func (u *countingUpstream) count(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[tool]
}

func gatewayTools(url string) string {
	return fmt.Sprintf(`
upstreams:
  up:
    url: %s/mcp
    timeout: 1s
    import: all
    prefix: up_
    trust_annotations: true
tools:
  up_pay:
    intent: "pay:{order}"
    check: "List payments of the order."
  up_refuse:
    intent: "refuse:{order}"
  up_refuse_nul:
    intent: "refuse_nul:{order}"
  up_pay_outage:
    intent: "pay_outage:{order}"
  up_hang:
    intent: "hang:{order}"
  up_send:
    intent: "send:{to}"
  up_gone:
    upstream: up
    upstream_tool: gone
    class: exactly-once
    intent: "gone:{order}"
`, url)
}

// gatewayEnv is one store with a service whose upstream tools run on a
// countingUpstream.
type gatewayEnv struct {
	execEnv
	up      *countingUpstream
	manager *upstream.Manager
	file    *classify.Registry
}

func startGateway(t *testing.T, sqlite bool) *gatewayEnv {
	t.Helper()
	return startGatewayWrapped(t, sqlite, nil)
}

// startGatewayWrapped is startGateway whose service uses wrap(store).
func startGatewayWrapped(t *testing.T, sqlite bool, wrap func(queue.Store) queue.Store) *gatewayEnv {
	t.Helper()
	e := &gatewayEnv{up: newCountingUpstream(t)}
	file, err := classify.Parse([]byte(gatewayTools(e.up.srv.URL)), classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.file = file
	e.manager = upstream.Start(context.Background(), file.Upstreams(), upstream.Options{ConnectTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = e.manager.Close() })
	reg, err := file.Import(e.manager.Listings())
	if err != nil {
		t.Fatal(err)
	}
	e.Env = apptest.NewEnv(t, apptest.EnvOptions{SQLite: sqlite, Tools: reg, WaitRecheck: time.Second,
		Service: queue.Options{Upstream: e.manager}, WrapStore: wrap})
	return e
}

func (e *gatewayEnv) submitRaw(tool, payload string) (queue.SubmitResult, error) {
	return e.Service.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: json.RawMessage(payload), Agent: "bot"})
}

// gatewayStores names the stores the gateway tests run on.
var gatewayStores = map[string]bool{"postgres": false, "sqlite": true}

// content is the text content of a stored CallToolResult.
func content(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func TestUpstreamExecutionByClass(t *testing.T) {
	t.Parallel()
	for name, sqlite := range gatewayStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startGateway(t, sqlite)
			ctx := context.Background()

			// Exactly-once: 20 agents at once, one upstream call.
			const agents = 20
			var (
				wg       sync.WaitGroup
				barrier  = make(chan struct{})
				mu       sync.Mutex
				created  []*queue.Action
				answered = map[string]int{}
			)
			for range agents {
				wg.Go(func() {
					<-barrier
					res, err := e.submitRaw("up_pay", `{"order":"o-1"}`)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						answered[string(queue.ErrorCode(err))]++
					case res.Created:
						created = append(created, res.Action)
					default:
						answered["replayed:"+string(res.Action.State)]++
					}
				})
			}
			close(barrier)
			wg.Wait()
			if len(created) != 1 || e.up.count("pay") != 1 {
				t.Fatalf("created %d, upstream calls %d, others %v; want one of each", len(created), e.up.count("pay"), answered)
			}
			for k := range answered {
				if k != string(queue.CodeInProgress) && k != "replayed:done" {
					t.Errorf("a concurrent caller got %s", k)
				}
			}
			paid := created[0]
			if paid.State != queue.StateDone || content(t, paid.Result) != "paid" {
				t.Fatalf("exactly-once answer: %s %s", paid.State, paid.Result)
			}

			// At-least-once: every call runs and answers final, done with
			// the upstream's result; nothing is held, not even by the same
			// key (the exactly-once call's, here).
			for i := range 2 {
				res, err := e.Service.Submit(ctx, queue.SubmitRequest{Tool: "up_sync", Payload: json.RawMessage(`{"order":"o-1"}`),
					IntentKey: "pay:o-1", Agent: "bot"})
				if err != nil || !res.Created || res.Action.State != queue.StateDone || content(t, res.Action.Result) != "synced" ||
					res.Action.Error != nil {
					t.Fatalf("at-least-once call %d: %v %+v", i, err, res.Action)
				}
			}
			if n := e.up.count("sync"); n != 2 {
				t.Errorf("at-least-once upstream calls %d, want 2", n)
			}
			// The exactly-once call of that key is still its holder.
			if res, err := e.submitRaw("up_pay", `{"order":"o-1"}`); err != nil || !res.Replayed || res.Action.ID != paid.ID {
				t.Errorf("exactly-once replay after at-least-once calls with its key: %v %+v, want the replay of %s", err, res.Action, paid.ID)
			}
			// An isError answer: failed with the tool's text, the
			// CallToolResult kept as result; calling again calls again.
			for i := range 2 {
				res, err := e.submitRaw("up_find", `{"order":"o-1"}`)
				if err != nil || !res.Created || res.Action.State != queue.StateFailed || apptest.Deref(res.Action.Error) != "no such order" ||
					content(t, res.Action.Result) != "no such order" {
					t.Fatalf("at-least-once isError call %d: %v %+v", i, err, res.Action)
				}
			}
			if n := e.up.count("find"); n != 2 {
				t.Errorf("at-least-once isError upstream calls %d, want 2", n)
			}

			// isError: failed with its text; the intent is free again.
			res, err := e.submitRaw("up_refuse", `{"order":"o-1"}`)
			if err != nil || res.Action.State != queue.StateFailed || apptest.Deref(res.Action.Error) != "card declined" {
				t.Fatalf("isError: %v %+v", err, res.Action)
			}

			// A call that hangs past the upstream's timeout: unknown, never
			// called again, one stale ticket after claim_timeout.
			res, err = e.submitRaw("up_hang", `{"order":"o-1"}`)
			if err != nil || !res.Created || res.Action.State != queue.StateInProgress {
				t.Fatalf("hang: %v %+v", err, res.Action)
			}
			hung := res.Action
			if n := e.EventCount(hung.ID, queue.EventDeliveryResult); n != 1 {
				t.Errorf("hang: %d delivery_unknown events, want 1", n)
			}
			if _, err := e.submitRaw("up_hang", `{"order":"o-1"}`); queue.ErrorCode(err) != queue.CodeInProgress {
				t.Errorf("repeat of the unknown call: %v, want in_progress", err)
			}
			e.Clock.Advance(classify.DefaultClaimTimeout + time.Minute)
			sw, err := e.Sweeper().Sweep(ctx)
			if err != nil || len(sw.Tickets) != 1 || sw.Tickets[0].ActionID != hung.ID {
				t.Fatalf("sweep: %v %+v", err, sw.Tickets)
			}
			if n := e.up.count("hang"); n != 1 {
				t.Errorf("hang called %d times, want 1", n)
			}

			// At-most-once: nothing until approval; then the executor calls
			// it once with the approved payload.
			res, err = e.submitRaw("up_send", `{"to":"ann"}`)
			if err != nil || res.Action.State != queue.StatePending || e.up.count("send") != 0 {
				t.Fatalf("at-most-once: %v %+v, %d calls", err, res.Action, e.up.count("send"))
			}
			if _, err := e.Service.Execute(ctx, res.Action.ID, "bot", "api"); queue.ErrorCode(err) != queue.CodeInvalidTransition {
				t.Errorf("agent execute of an upstream action: %v, want invalid_transition", err)
			}
			if _, err := e.Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: res.Action.ID, By: "user:ann@example.com",
				Payload: json.RawMessage(`{"to":"ann","note":"edited"}`)}); err != nil {
				t.Fatal(err)
			}
			ex := executor.NewUpstream(queue.NewDispatch(e.Service), e.manager, executor.UpstreamConfig{})
			ex.Scan(ctx)
			ex.Scan(ctx)
			sent := e.waitState(res.Action.ID, queue.StateDone)
			if content(t, sent.Result) != "sent" || e.up.count("send") != 1 || !queue.JSONEqual(json.RawMessage(e.up.args["send"][0]), json.RawMessage(`{"to":"ann","note":"edited"}`)) {
				t.Errorf("at-most-once: result %s, %d calls with %v", sent.Result, e.up.count("send"), e.up.args["send"])
			}

			// A tool the upstream does not list is refused, nothing stored.
			if _, err := e.submitRaw("up_gone", `{"order":"o-1"}`); queue.ErrorCode(err) != queue.CodeUpstreamUnavailable {
				t.Errorf("unlisted tool: %v, want upstream_unavailable", err)
			}
		})
	}
}

// When the upstream stops listing a tool, its pending actions can still be
// rejected, and approving one is refused with a clear error.
func TestRemovedUpstreamToolCannotBeApproved(t *testing.T) {
	t.Parallel()
	for name, sqlite := range gatewayStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startGateway(t, sqlite)
			ctx := context.Background()
			a, b := e.Submit("up_send", map[string]any{"to": "a"}), e.Submit("up_send", map[string]any{"to": "b"})
			listing := e.manager.Listings()["up"]
			var kept []classify.UpstreamTool
			for _, ut := range listing.Tools {
				if ut.Name != "send" {
					kept = append(kept, ut)
				}
			}
			reg, err := e.file.Import(map[string]classify.UpstreamListing{"up": {Tools: kept}})
			if err != nil {
				t.Fatal(err)
			}
			e.CurrentTools.Store(reg)
			_, err = e.Service.Decide(ctx, queue.DecideRequest{To: queue.StateApproved, ID: a.ID, By: "user:ann@example.com"})
			var qe *queue.Error
			if !errors.As(err, &qe) || qe.Code != queue.CodeUpstreamUnavailable || !strings.Contains(qe.Detail, "does not list tool send") {
				t.Fatalf("approve: %v", err)
			}
			if _, err := e.Service.Decide(ctx, queue.DecideRequest{To: queue.StateRejected, ID: b.ID, By: "user:ann@example.com", Note: "tool is gone"}); err != nil {
				t.Fatalf("reject: %v", err)
			}
			if _, err := e.submitRaw("up_send", `{"to":"c"}`); queue.ErrorCode(err) != queue.CodeUpstreamUnavailable {
				t.Errorf("submit: %v, want upstream_unavailable", err)
			}
		})
	}
}

// An upstream's error text is the upstream's to choose, NUL characters
// included, which the stores cannot hold: an isError answer still fails the
// action with its text (the NUL replaced), rather than leaving it in_progress
// for an operator as if the outcome were unknown.
func TestUpstreamErrorTextWithNUL(t *testing.T) {
	t.Parallel()
	for name, sqlite := range gatewayStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startGateway(t, sqlite)
			res, err := e.submitRaw("up_refuse_nul", `{"order":"o-1"}`)
			if err != nil || res.Action.State != queue.StateFailed || apptest.Deref(res.Action.Error) != "card\uFFFDdeclined" {
				t.Fatalf("isError with a NUL: %v %+v", err, res.Action)
			}
			if n := e.up.count("refuse_nul"); n != 1 {
				t.Errorf("upstream calls %d, want 1", n)
			}
		})
	}
}

// An upstream's answer learnt while the database is away is kept and
// written once it answers again (docs/operations.md, "Replication and
// failover"): once, not once for each of the record's tries, which each
// kept it and, written later, added a delivery_unknown event for the
// answer already stored.
func TestUpstreamOutcomeKeptIsWrittenOnce(t *testing.T) {
	t.Parallel()
	for name, sqlite := range gatewayStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var outage apptest.Outage
			e := startGatewayWrapped(t, sqlite, outage.Wrap)
			e.up.outage = &outage
			res, err := e.submitRaw("up_pay_outage", `{"order":"o-1"}`)
			if err != nil || res.Action.State != queue.StateInProgress {
				t.Fatalf("submit during the outage: %v %+v", err, res.Action)
			}
			outage.End()
			// Shutdown waits for the call's record and tries every kept
			// outcome once more.
			e.Service.Shutdown(t.Context())
			a, err := e.Store.ActionGetByID(t.Context(), res.Action.ID)
			if err != nil || a.State != queue.StateDone {
				t.Fatalf("after the outage: %v %+v", err, a)
			}
			if n := e.EventCount(a.ID, queue.EventCompleted); n != 1 {
				t.Errorf("%d completed events, want 1", n)
			}
			if n := e.EventCount(a.ID, queue.EventDeliveryResult); n != 0 {
				t.Errorf("%d delivery_unknown events, want none: the answer was written more than once", n)
			}
			if n := e.up.count("pay_outage"); n != 1 {
				t.Errorf("upstream calls %d, want 1", n)
			}
		})
	}
}
