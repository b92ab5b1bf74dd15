package templates_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// An action executed on an upstream MCP server shows operators the
// upstream, its tool, the arguments sent and the upstream result; its
// ticket says which upstream and tool to check when the tool gives no check.
func TestUpstreamActionForOperators(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 3, 21, 10, 0, 0, 0, time.UTC)
	a := &queue.Action{ID: "01a22fcc-c845-7f08-8975-e44ad59ce918", Tool: "crm_send", Class: classify.AtMostOnce,
		IntentKey: "send:ann", Attempt: 1, State: queue.StateDone, CreatedAt: now,
		Payload: json.RawMessage(`{"to":"ann"}`), ApprovedPayload: json.RawMessage(`{"to":"ann","note":"edited"}`),
		Result: json.RawMessage(`{"content":[{"type":"text","text":"sent"}]}`),
		Spec:   classify.Tool{Name: "crm_send", Class: classify.AtMostOnce, Upstream: "crm", UpstreamTool: "send"}}
	var buf bytes.Buffer
	v := templates.ActionView{Action: a, Payload: `{"to":"ann"}`, ApprovedPayload: `{"to":"ann","note":"edited"}`, Result: string(a.Result)}
	if err := templates.ActionDetail(v).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`data-testid="upstream"`, `<code>crm</code> tool <code>send</code>`,
		`data-testid="upstream-arguments">{&#34;to&#34;:&#34;ann&#34;,&#34;note&#34;:&#34;edited&#34;}`,
		"Upstream result", "approvals, on upstream crm tool send", "Check in the system behind upstream crm whether its tool send ran"} {
		if !strings.Contains(page, want) {
			t.Errorf("action page lacks %q", want)
		}
	}

	buf.Reset()
	row := templates.TicketRow{Ticket: &queue.Ticket{ID: "7", Kind: queue.TicketStale, State: queue.TicketOpen, OpenedAt: now}, Action: a}
	if err := templates.TicketCard(templates.TicketsView{Now: now}, row).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if card := buf.String(); !strings.Contains(card, "upstream crm whether its tool send ran") {
		t.Errorf("ticket lacks the upstream check:\n%s", card)
	}
}
