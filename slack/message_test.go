package slack_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/slack"
	"github.com/approvals/approvals/slack/slacktest"
)

// postedBlocks posts the pending notification of a and returns its blocks.
func postedBlocks(t *testing.T, a *queue.Action) []map[string]any {
	t.Helper()
	f, log := slacktest.New(t, botToken), &messageLog{}
	if err := newClient(t, f, log, botToken).Notify(context.Background(), notification("n1", classify.EventActionPending, a)); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	return f.Calls("chat.postMessage")[0].Blocks()
}

// linkButtons are the url of every link button.
func linkButtons(blocks []map[string]any) []string {
	var out []string
	for _, b := range blocks {
		els, _ := b["elements"].([]any)
		for _, e := range els {
			if m, _ := e.(map[string]any); m["url"] != nil {
				out = append(out, m["action_id"].(string)+"="+m["url"].(string))
			}
		}
	}
	return out
}

// TestApproveButtonOnlyForWhatIsShown renders the blocks of a pending action in each case
// docs/channels.md names ("Slack channel"): Approve only when every payload field is shown whole and there is no
// warning; otherwise what is hidden is said, and "Review in approvals" links to the page.
func TestApproveButtonOnlyForWhatIsShown(t *testing.T) {
	t.Parallel()
	preview := map[string]string{"title": "{subject}", "to": "{to}", "body": "{body}"}
	tests := []struct {
		name     string
		payload  string
		preview  map[string]string
		warnings []string
		hidden   []string // said under "Not shown here"; none: Approve is offered
	}{
		{name: "everything shown", payload: `{"to":"c@example.com","subject":"Refund","body":"Dear customer"}`, preview: preview},
		{name: "hidden fields", payload: `{"to":"c@example.com","subject":"Refund","body":"b","customer_id":"c-1","topic":"t","cc":"x@evil.example"}`,
			preview: preview, hidden: []string{"3 more fields (cc, customer" + "\u200b_\u200b" + "id, topic)"}},
		{name: "truncation", payload: `{"to":"c@example.com","subject":"Refund","body":"` + strings.Repeat("a", 1801) + `"}`,
			preview: preview, hidden: []string{"the end of body (cut at 1800 characters)"}},
		// Escaped, "&" is "&amp;" and "*" has a zero-width space on each side: what a
		// field shows is measured as written, within Slack's 2000 characters a field.
		{name: "escaping fits", payload: `{"to":"c@example.com","subject":"Refund","body":"` + strings.Repeat("&*", 200) + `"}`, preview: preview},
		{name: "escaping cut", payload: `{"to":"c@example.com","subject":"Refund","body":"` + strings.Repeat("&", 1000) + `"}`,
			preview: preview, hidden: []string{"the end of body (cut at 1800 characters)"}},
		// A payload's key is the agent's text, of any length: a hidden field is named
		// within what a message holds.
		{name: "long hidden key", payload: `{"to":"c@example.com","subject":"Refund","body":"b","` + strings.Repeat("k", 4000) + `":1}`,
			preview: preview, hidden: []string{"1 more field (" + strings.Repeat("k", 60) + "…)"}},
		{name: "title cut", payload: `{"to":"c@example.com","subject":"Refund\nApproved by ann@example.com","body":"b"}`,
			preview: preview, hidden: []string{"the end of the title"}},
		{name: "warnings", payload: `{"to":"c@example.com","subject":"Refund","body":"ad\u200bmin"}`, preview: preview,
			warnings: []string{queue.WarningInvisibleCharacters}, hidden: []string{"invisible characters"}},
		{name: "no preview", payload: `{"to":"c@example.com"}`, hidden: []string{"the payload (this tool has no preview)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := pendingAction()
			a.Payload, a.Spec.Preview, a.Warnings = json.RawMessage(tt.payload), tt.preview, tt.warnings
			blocks := postedBlocks(t, a)
			text := blockText(blocks)
			link := "review=https://approvals.example.com/actions/" + a.ID
			if len(tt.hidden) == 0 {
				if got := buttons(blocks); !slices.Contains(got, "approve="+a.ID) {
					t.Fatalf("buttons %v, want approve", got)
				}
				if !slack.OneClick(a) || strings.Contains(text, "Not shown here") {
					t.Fatalf("everything is shown, yet the message says something is not:\n%s", text)
				}
				return
			}
			if got := buttons(blocks); slices.Contains(got, "approve="+a.ID) || !slices.Contains(got, "reject="+a.ID) {
				t.Fatalf("buttons %v, want reject and no approve", got)
			}
			if got := linkButtons(blocks); !slices.Equal(got, []string{link}) {
				t.Fatalf("link buttons %v, want %s", got, link)
			}
			if !strings.Contains(text, "Review in approvals") || !strings.Contains(text, "*Not shown here:*") {
				t.Fatalf("the message does not say what is hidden:\n%s", text)
			}
			for _, h := range tt.hidden {
				if !strings.Contains(text, h) {
					t.Errorf("the message does not say %q:\n%s", h, text)
				}
			}
			if slack.OneClick(a) {
				t.Fatal("OneClick is true for a message that hides something")
			}
		})
	}
}

// TestAgentTextEscaped: formatting characters, links and line breaks in the payload reach
// Slack inert: no bold, no mention, and no line of agent text that is not quoted, so a
// field cannot draw a fake "Approved by" line.
func TestAgentTextEscaped(t *testing.T) {
	t.Parallel()
	a := pendingAction()
	a.Payload = json.RawMessage(`{"to":"*bold* _it_ ~no~ ` + "`code`" + ` <!channel> & <https://evil.example|click>","subject":"Refund",` +
		`"body":"Dear customer\n\n:white_check_mark: *Approved* by ann@example.com\r\nline three\u2028line four"}`)
	text := blockText(postedBlocks(t, a))
	for _, raw := range []string{"*bold*", "_it_", "~no~", "`code`", "<!channel>", "<https://evil.example", "\n:white_check_mark: *Approved*", "\nline three", "\nline four", "\r"} {
		if strings.Contains(text, raw) {
			t.Errorf("blocks carry %q unescaped:\n%s", raw, text)
		}
	}
	for _, want := range []string{"\u200b*\u200bbold\u200b*\u200b", "&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;",
		"*body*\n>Dear customer\n>\n>:white\u200b_\u200bcheck\u200b_\u200bmark: \u200b*\u200bApproved\u200b*\u200b by ann@example.com\n>line three\n>line four"} {
		if !strings.Contains(text, want) {
			t.Errorf("blocks lack %q:\n%s", want, text)
		}
	}
}
