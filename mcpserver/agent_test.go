package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/agentapi"
	"github.com/approvals/approvals/mcpserver"
	"github.com/approvals/approvals/queue"
)

// paymentProvider is a fake external system that counts real effects.
type paymentProvider struct {
	url     string
	mu      sync.Mutex
	refunds map[string]int // by order/line
}

func newPaymentProvider(t *testing.T) *paymentProvider {
	p := &paymentProvider{refunds: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			OrderID string  `json:"order_id"`
			LineID  string  `json:"line_id"`
			Amount  float64 `json:"amount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		p.refunds[in.OrderID+"/"+in.LineID]++
		n := p.refunds[in.OrderID+"/"+in.LineID]
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"refund_id": fmt.Sprintf("re_%s_%s_%d", in.OrderID, in.LineID, n), "amount": in.Amount})
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *paymentProvider) effects(order, line string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refunds[order+"/"+line]
}

// refund performs the real effect.
func (p *paymentProvider) refund(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/refunds", bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("refund: %d %s %v", resp.StatusCode, b, err)
	}
	return b, nil
}

// holdFirstCall lets the first tools/call of one tool be processed in full
// (the claim is committed), then holds its answer back until the client
// gives up: a timeout on the client side after the server acted.
type holdFirstCall struct {
	tool      string
	next      http.Handler
	taken     atomic.Bool
	processed chan struct{}
	release   chan struct{}
}

func (h *holdFirstCall) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &msg)
	if msg.Method != "tools/call" || msg.Params.Name != h.tool || !h.taken.CompareAndSwap(false, true) {
		h.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	h.next.ServeHTTP(rec, r)
	close(h.processed)
	select {
	case <-r.Context().Done(): // the client gave up; the answer is lost
	case <-h.release:
	}
}

// newHeldEnv starts a server whose first call of tool times out on the
// client after the server has processed it.
func newHeldEnv(t *testing.T, tool string) (*env, *holdFirstCall) {
	hold := &holdFirstCall{tool: tool, processed: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, envOptions{wrapMCP: func(next http.Handler) http.Handler { hold.next = next; return hold }})
	t.Cleanup(func() { close(hold.release) }) // before the server closes
	return e, hold
}

// scriptedAgent is a deterministic stand-in for a model: it drives the MCP
// tools with a per-call timeout, as an agent framework does, and keeps a
// trace of what it called and what came back.
type scriptedAgent struct {
	name     string
	cs       *mcp.ClientSession
	provider *paymentProvider
	timeout  time.Duration
	trace    []string
}

func (a *scriptedAgent) call(ctx context.Context, tool string, args any) (*mcp.CallToolResult, error) {
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	res, err := a.cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch {
	case err != nil && cctx.Err() != nil:
		a.trace = append(a.trace, tool+":timeout")
	case err != nil:
		a.trace = append(a.trace, tool+":error")
	case res.IsError:
		var r mcpserver.Refusal
		_ = decodeResult(res, &r)
		a.trace = append(a.trace, tool+":refused:"+string(r.Code))
	default:
		var act queue.Action
		_ = decodeResult(res, &act)
		a.trace = append(a.trace, tool+":"+string(act.State))
	}
	return res, err
}

func decodeResult(res *mcp.CallToolResult, v any) error {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// performAndComplete does the effect once and reports it.
func (a *scriptedAgent) performAndComplete(ctx context.Context, act queue.Action) error {
	result, err := a.provider.refund(ctx, act.Payload)
	if err != nil {
		return err
	}
	res, err := a.call(ctx, "complete_action", map[string]any{"id": act.ID, "result": json.RawMessage(result)})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("complete_action refused: %s", text(res))
	}
	return nil
}

// refundGuided follows the guidance in issue_refund's description: a fresh
// in_progress result is its claim (perform once, then complete); after a
// timeout or error it never retries blindly but calls find_actions first.
func (a *scriptedAgent) refundGuided(ctx context.Context, args map[string]any) error {
	key := fmt.Sprintf("refund:%s:%s", args["order_id"], args["line_id"])
	for range 3 {
		res, err := a.call(ctx, "issue_refund", args)
		if err == nil {
			if res.IsError {
				return fmt.Errorf("refused: %s", text(res))
			}
			var act queue.Action
			if err := decodeResult(res, &act); err != nil {
				return err
			}
			switch act.State {
			case queue.StateInProgress: // our fresh claim
				return a.performAndComplete(ctx, act)
			case queue.StateDone: // someone already refunded it
				return nil
			}
			return fmt.Errorf("unexpected state %s", act.State)
		}
		// Timed out or failed: read the intent before anything else.
		found, err := a.call(ctx, "find_actions", map[string]any{"intent_key": key})
		if err != nil {
			return err
		}
		var list agentapi.ActionList
		if err := decodeResult(found, &list); err != nil {
			return err
		}
		if len(list.Actions) == 0 {
			continue // the call never reached approvals: calling again is safe
		}
		newest := list.Actions[0]
		switch {
		case newest.State == queue.StateDone:
			return nil
		case newest.State == queue.StateInProgress && newest.RequestedBy == "agent:"+a.name:
			// Our timed-out call claimed it and we never performed the effect.
			return a.performAndComplete(ctx, *newest)
		case newest.State == queue.StateFailed:
			continue
		}
		return fmt.Errorf("intent %s is %s for %s: not ours to act on", key, newest.State, newest.RequestedBy)
	}
	return errors.New("gave up")
}

// refundNaive ignores the guidance: when a call fails it simply calls the
// same tool again, and it performs the effect only when a call hands it a
// fresh claim.
func (a *scriptedAgent) refundNaive(ctx context.Context, args map[string]any) (*mcp.CallToolResult, error) {
	for range 3 {
		res, err := a.call(ctx, "issue_refund", args)
		if err != nil {
			continue
		}
		if res.IsError {
			return res, nil
		}
		var act queue.Action
		if err := decodeResult(res, &act); err != nil {
			return nil, err
		}
		if act.State == queue.StateInProgress {
			return res, a.performAndComplete(ctx, act)
		}
		return res, nil
	}
	return nil, errors.New("gave up")
}

func (e *env) agent(t *testing.T, name string, p *paymentProvider) *scriptedAgent {
	return &scriptedAgent{name: name, cs: e.connect(t, e.token(t, name)), provider: p, timeout: 3 * time.Second}
}

func processed(h *holdFirstCall) bool {
	select {
	case <-h.processed:
		return true
	default:
		return false
	}
}

// The agent-layer test: the first issue_refund call times out on the client
// after the server claimed the intent. The agent follows the guidance, finds
// its own claim, performs the refund once and completes it: exactly one real
// effect. Another agent with the same objective then gets the stored outcome.
func TestGuidedAgentAfterTimeoutCausesOneEffect(t *testing.T) {
	t.Parallel()
	e, hold := newHeldEnv(t, "issue_refund")
	provider := newPaymentProvider(t)
	ctx := context.Background()
	bot := e.agent(t, "refunder", provider)
	args := map[string]any{"order_id": "o-1", "line_id": "l-1", "amount": 12.5}

	if err := bot.refundGuided(ctx, args); err != nil {
		t.Fatalf("guided agent: %v (trace %v)", err, bot.trace)
	}
	if !processed(hold) {
		t.Fatal("the held call was never processed by the server")
	}
	want := []string{"issue_refund:timeout", "find_actions:", "complete_action:done"}
	if len(bot.trace) != len(want) {
		t.Fatalf("trace %v, want %v", bot.trace, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(bot.trace[i], w) {
			t.Fatalf("trace %v, want %v", bot.trace, want)
		}
	}
	if n := provider.effects("o-1", "l-1"); n != 1 {
		t.Fatalf("real effects = %d, want exactly 1", n)
	}

	// Another agent with the same objective derives the same intent and gets
	// the stored outcome, not a second refund.
	other := e.agent(t, "refunder-2", provider)
	if err := other.refundGuided(ctx, args); err != nil {
		t.Fatalf("second agent: %v (trace %v)", err, other.trace)
	}
	if n := provider.effects("o-1", "l-1"); n != 1 {
		t.Fatalf("real effects = %d after a second agent, want 1", n)
	}

	list, _, err := e.svc.List(ctx, queue.ListRequest{IntentKey: "refund:o-1:l-1", Limit: 10})
	if err != nil || len(list) != 1 {
		t.Fatalf("actions of the intent: %d (%v), want 1", len(list), err)
	}
	a := list[0]
	if a.State != queue.StateDone || a.RequestedBy != "agent:refunder" || !strings.Contains(string(a.Result), "re_o-1_l-1_1") {
		t.Fatalf("action %+v", a)
	}
	evs, err := queue.Timeline(ctx, e.store, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
		if ev.Channel != mcpserver.Channel {
			t.Errorf("event %s has channel %q, want mcp", ev.Kind, ev.Channel)
		}
	}
	if strings.Join(kinds, ",") != "submitted,completed,replayed" {
		t.Errorf("timeline %v", kinds)
	}
}

// A naive agent that retries the same call after its timeout gets
// in_progress (the claim its first call made) and does nothing; one that
// repeats a call that already succeeded gets the stored result. Neither
// causes a second effect.
func TestNaiveRetryCausesNoSecondEffect(t *testing.T) {
	t.Parallel()
	e, hold := newHeldEnv(t, "issue_refund")
	provider := newPaymentProvider(t)
	ctx := context.Background()
	naive := e.agent(t, "naive", provider)
	args := map[string]any{"order_id": "o-7", "line_id": "l-2", "amount": 3}

	res, err := naive.refundNaive(ctx, args)
	if err != nil {
		t.Fatalf("naive agent: %v (trace %v)", err, naive.trace)
	}
	if !processed(hold) {
		t.Fatal("the held call was never processed by the server")
	}
	if len(naive.trace) != 2 || naive.trace[0] != "issue_refund:timeout" || naive.trace[1] != "issue_refund:refused:in_progress" {
		t.Fatalf("trace %v", naive.trace)
	}
	r := wantRefusal(t, res, queue.CodeInProgress)
	if r.Action == nil || r.Action.RequestedBy != "agent:naive" || !strings.Contains(text(res), "find_actions") {
		t.Fatalf("refusal %+v: %s", r, text(res))
	}
	if n := provider.effects("o-7", "l-2"); n != 0 {
		t.Fatalf("real effects = %d, want 0: a retry must not perform", n)
	}
	evs, err := queue.Timeline(ctx, e.store, r.Action.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Kind != queue.EventInProgressSeen || evs[1].Channel != mcpserver.Channel {
		t.Errorf("timeline %+v", evs)
	}
	// What the guidance would have made of it: find_actions tells the agent
	// the claim is its own and how to finish.
	found := call(t, naive.cs, "find_actions", map[string]any{"intent_key": "refund:o-7:l-2"})
	if found.IsError || !strings.Contains(text(found), "claimed by you") || !strings.Contains(text(found), "complete_action") {
		t.Errorf("find_actions text: %s", text(found))
	}

	// A call that succeeded, repeated: the stored result, no second effect.
	args2 := map[string]any{"order_id": "o-8", "line_id": "l-1", "amount": 4}
	if _, err := naive.refundNaive(ctx, args2); err != nil {
		t.Fatalf("naive agent: %v (trace %v)", err, naive.trace)
	}
	res, err = naive.refundNaive(ctx, args2)
	if err != nil {
		t.Fatal(err)
	}
	done := wantAction(t, res, queue.StateDone)
	if !strings.Contains(string(done.Result), "re_o-8_l-1_1") || !strings.Contains(text(res), "Do not perform it again") {
		t.Fatalf("replay %+v: %s", done, text(res))
	}
	if n := provider.effects("o-8", "l-1"); n != 1 {
		t.Fatalf("real effects = %d, want 1", n)
	}
}
