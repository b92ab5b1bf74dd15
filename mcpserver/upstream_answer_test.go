package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// What an agent reads after a call of an upstream tool, and later from
// get_action: an at-least-once call ends done or failed like an
// exactly-once one, but holds nothing, so its texts say that repeating it
// is harmless, never "do not call it again" or "that starts attempt 2".
func TestUpstreamAnswerTexts(t *testing.T) {
	t.Parallel()
	finished := time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)
	action := func(class classify.Class, state queue.State, result, errText string) *queue.Action {
		a := &queue.Action{ID: "01890a5d-0000-7000-8000-000000000001", Tool: "crm_lookup", Class: class, IntentKey: "contact:c-1",
			Attempt: 1, State: state, Payload: json.RawMessage(`{}`), RequestedBy: "agent:bot", FinishedAt: &finished,
			Result: json.RawMessage(result),
			Spec:   classify.Tool{Name: "crm_lookup", Class: class, Upstream: "crm", UpstreamTool: "lookup"}}
		if errText != "" {
			a.Error = &errText
		}
		return a
	}
	const (
		found   = `{"content":[{"type":"text","text":"Ann, ann@example.com"}],"isError":false}`
		missing = `{"content":[{"type":"text","text":"no such contact"}],"isError":true}`
	)
	for _, tc := range []struct {
		name          string
		a             *queue.Action
		first         string   // the upstream's own content, first
		answer, later []string // in the call's answer, in get_action's
		never         []string // in neither
	}{
		{"at-least-once done", action(classify.AtLeastOnce, queue.StateDone, found, ""), "Ann, ann@example.com",
			[]string{"it is done", "Repeating it is harmless"}, []string{"result field", "Repeating it is harmless"},
			[]string{"Do not call it again", "Do not perform it again"}},
		{"at-least-once failed", action(classify.AtLeastOnce, queue.StateFailed, missing, "no such contact"), "no such contact",
			[]string{"it failed: no such contact", "Repeating it is harmless"}, []string{"failed (no such contact)", "Repeating it is harmless"},
			[]string{"intent is free", "attempt 2", "did not happen"}},
		{"exactly-once done", action(classify.ExactlyOnce, queue.StateDone, found, ""), "Ann, ann@example.com",
			[]string{"Do not call it again"}, []string{"Do not perform it again"}, []string{"harmless"}},
		{"exactly-once failed", action(classify.ExactlyOnce, queue.StateFailed, missing, "no such contact"), "no such contact",
			[]string{"the intent is free"}, []string{"attempt 2"}, []string{"harmless"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := upstreamAnswer(queue.SubmitResult{Action: tc.a, Created: true}, "bot")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) != 3 || res.Content[0].(*mcp.TextContent).Text != tc.first {
				t.Fatalf("content %+v, want the upstream's own content first, then two texts", res.Content)
			}
			answer, later := res.Content[1].(*mcp.TextContent).Text, nextStep(tc.a, "bot")
			for _, want := range tc.answer {
				if !strings.Contains(answer, want) {
					t.Errorf("the call's answer %q lacks %q", answer, want)
				}
			}
			for _, want := range tc.later {
				if !strings.Contains(later, want) {
					t.Errorf("get_action's text %q lacks %q", later, want)
				}
			}
			for _, not := range tc.never {
				if strings.Contains(answer, not) || strings.Contains(later, not) {
					t.Errorf("%q or %q says %q", answer, later, not)
				}
			}
		})
	}
}
