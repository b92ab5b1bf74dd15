// Package teams is the Microsoft Teams notification channel: one Adaptive Card (version 1.4)
// per event, posted to a Teams Workflows webhook ("Post to a channel when a webhook request is
// received"), with the preview's fields, who asked, when it expires and an Action.OpenUrl to
// the action page. Deciding needs the dashboard: buttons that act in Teams need a Bot
// Framework app, which a webhook is not. It is a queue.Channel, driven by
// maintenance.ChannelNotifier.
package teams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
)

// Config sets up a Notifier.
type Config struct {
	PublicURL string // APPROVALS_PUBLIC_URL, the base of the link to the action page
	// Client sends the requests; nil means one with a 10 s timeout. Redirects are never
	// followed: the card would go to a host nobody configured.
	Client *http.Client
}

// Notifier posts cards to the channel's Workflows webhook.
type Notifier struct {
	publicURL string
	client    *http.Client
}

// New checks cfg and returns a Notifier.
func New(cfg Config) (*Notifier, error) {
	if cfg.PublicURL == "" {
		return nil, errors.New("teams channel: APPROVALS_PUBLIC_URL is not set")
	}
	c := http.Client{Timeout: 10 * time.Second}
	if cfg.Client != nil {
		c = *cfg.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	// Each request carries the traceparent of the span that sent it.
	c.Transport = tracing.Transport(c.Transport)
	return &Notifier{publicURL: strings.TrimRight(cfg.PublicURL, "/"), client: &c}, nil
}

// Message is the body posted to the webhook: a message with one Adaptive Card attachment,
// as Workflows' "Post card in a chat or channel" reads it.
type Message struct {
	Type        string       `json:"type"` // "message"
	Attachments []Attachment `json:"attachments"`
}

// Attachment carries the card.
type Attachment struct {
	ContentType string  `json:"contentType"` // ContentType
	ContentURL  *string `json:"contentUrl"`  // null, as Teams' own samples send it
	Content     Card    `json:"content"`
}

// ContentType is an Adaptive Card attachment's content type.
const ContentType = "application/vnd.microsoft.card.adaptive"

// Card is an Adaptive Card of version 1.4.
type Card struct {
	Schema  string    `json:"$schema"`
	Type    string    `json:"type"` // "AdaptiveCard"
	Version string    `json:"version"`
	Body    []Element `json:"body"`
	Actions []Action  `json:"actions"`
}

// Element is a body element: a TextBlock (what approvals writes), or a RichTextBlock of
// TextRuns for what an agent wrote, since a TextRun is never read as Markdown, so a payload
// cannot draw a link, a heading or a fake "Approved by" line.
type Element struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	Inlines  []TextRun `json:"inlines,omitempty"`
	Wrap     bool      `json:"wrap,omitempty"`
	Weight   string    `json:"weight,omitempty"`
	Size     string    `json:"size,omitempty"`
	IsSubtle bool      `json:"isSubtle,omitempty"`
	Color    string    `json:"color,omitempty"`
	Spacing  string    `json:"spacing,omitempty"`
}

// TextRun is plain text inside a RichTextBlock.
type TextRun struct {
	Type   string `json:"type"` // "TextRun"
	Text   string `json:"text"`
	Weight string `json:"weight,omitempty"`
	Size   string `json:"size,omitempty"`
}

// Action is the card's one action: open the action page.
type Action struct {
	Type  string `json:"type"` // "Action.OpenUrl"
	Title string `json:"title"`
	URL   string `json:"url"`
}

// maxFieldRunes cuts a preview field: Teams refuses a card over 28 KB.
const maxFieldRunes = 2000

// Render builds the card for n from the action as it is now.
func (t *Notifier) Render(n queue.Notification) (Message, error) {
	if n.Plan != nil {
		return t.renderPlan(n), nil
	}
	a := n.Action
	if a == nil {
		return Message{}, fmt.Errorf("notification %s: no action", n.ID)
	}
	p := preview.Of(a)
	body := []Element{
		{Type: "TextBlock", Text: preview.Label(n), Weight: "Bolder", Wrap: true, Color: "Accent"},
		agentText(preview.Headline(a), "Large", "Bolder"),
		{Type: "TextBlock", Text: "Tool " + a.Tool, IsSubtle: true, Wrap: true, Spacing: "None"},
	}
	for _, f := range p.Fields {
		body = append(body, agentText(f.Name, "", "Bolder"), agentText(cut(f.Value, maxFieldRunes), "", ""))
	}
	facts := []string{"Intent key: " + a.IntentKey, "Asked by: " + a.RequestedBy}
	if a.State == queue.StatePending && a.ExpiresAt != nil {
		facts = append(facts, "Expires: "+a.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	body = append(body, agentText(strings.Join(facts, "\n"), "", ""))
	if tk := n.Ticket; tk != nil {
		body = append(body, agentText(fmt.Sprintf("Ticket %s (%s) opened %s", tk.ID, tk.Kind, tk.OpenedAt.UTC().Format("2006-01-02 15:04 UTC")), "", ""))
	}
	if a.State != queue.StatePending {
		body = append(body, agentText(outcome(a), "", "Bolder"))
	} else if n.Type != classify.EventTicketOpened {
		body = append(body, Element{Type: "TextBlock", Text: "Decide on the action page: a decision needs a signed-in session.", IsSubtle: true, Wrap: true})
	}
	return Message{Type: "message", Attachments: []Attachment{{ContentType: ContentType, Content: Card{
		Schema: "http://adaptivecards.io/schemas/adaptive-card.json", Type: "AdaptiveCard", Version: "1.4",
		Body:    body,
		Actions: []Action{{Type: "Action.OpenUrl", Title: "Open in approvals", URL: t.publicURL + "/actions/" + a.ID}},
	}}}}, nil
}

// planFieldBudget bounds the characters of all a plan card's preview fields, under the
// 28 KB Teams takes; past it each step shows its headline only.
const planFieldBudget = 16000

// renderPlan builds a plan's card: every step (tool, class, what its rule decided, its
// preview), the approvals the plan needs and Action.OpenUrl to the plan page.
func (t *Notifier) renderPlan(n queue.Notification) Message {
	pl := n.Plan
	label := "Plan approval request"
	switch n.Type {
	case classify.EventPlanPending:
		label = "Plan approval needed"
	case classify.EventPlanReminder:
		label = "Reminder: plan approval needed"
	case classify.EventPlanEscalated:
		label = "Escalated: plan approval needed"
	}
	body := []Element{
		{Type: "TextBlock", Text: fmt.Sprintf("%s · %d steps", label, len(pl.Steps)), Weight: "Bolder", Wrap: true, Color: "Accent"},
		agentText(pl.Title, "Large", "Bolder"),
		{Type: "TextBlock", Text: fmt.Sprintf("Needs %d approval(s), %d so far", pl.ApprovalsRequired, len(pl.Approvals)), IsSubtle: true, Wrap: true, Spacing: "None"},
	}
	budget := 0
	for _, a := range n.PlanSteps {
		for _, f := range preview.Of(a).Fields {
			budget += min(len([]rune(f.Value)), maxFieldRunes)
		}
	}
	for i, st := range pl.Steps {
		decision := st.Decision
		if st.Rule != "" {
			decision += " (rule " + st.Rule + ")"
		}
		body = append(body, agentText(fmt.Sprintf("Step %d: %s (%s; %s)", st.N, st.Tool, st.Class, decision), "", "Bolder"))
		if i >= len(n.PlanSteps) {
			continue
		}
		a := n.PlanSteps[i]
		body = append(body, agentText(preview.Headline(a), "", ""))
		if budget <= planFieldBudget {
			for _, f := range preview.Of(a).Fields {
				body = append(body, agentText(f.Name+": "+cut(f.Value, maxFieldRunes), "", ""))
			}
		}
	}
	facts := []string{"Asked by: " + pl.Agent}
	if pl.State == queue.PlanPending {
		facts = append(facts, "Expires: "+pl.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	body = append(body, agentText(strings.Join(facts, "\n"), "", ""))
	if pl.State != queue.PlanPending {
		by := ""
		if pl.DecidedBy != nil {
			by = " by " + strings.TrimPrefix(*pl.DecidedBy, "user:")
		}
		body = append(body, agentText("Plan "+strings.ReplaceAll(string(pl.State), "_", " ")+by, "", "Bolder"))
	} else {
		body = append(body, Element{Type: "TextBlock", Text: "Decide on the plan page: a decision needs a signed-in session.", IsSubtle: true, Wrap: true})
	}
	return Message{Type: "message", Attachments: []Attachment{{ContentType: ContentType, Content: Card{
		Schema: "http://adaptivecards.io/schemas/adaptive-card.json", Type: "AdaptiveCard", Version: "1.4",
		Body:    body,
		Actions: []Action{{Type: "Action.OpenUrl", Title: "Open the plan in approvals", URL: t.publicURL + "/plans/" + pl.ID}},
	}}}}
}

// agentText is text approvals did not write, as a RichTextBlock of one TextRun.
func agentText(s, size, weight string) Element {
	return Element{Type: "RichTextBlock", Inlines: []TextRun{{Type: "TextRun", Text: s, Size: size, Weight: weight}}}
}

// Send posts m to the channel's webhook. A 2xx answer (Workflows answers 202) is delivery;
// a 429 honours Retry-After; any other answer, a redirect or a connection error is an error
// for the outbox to retry. Errors name the webhook's host only: its path is the credential.
func (t *Notifier) Send(ctx context.Context, n queue.Notification, m Message) (queue.Sent, error) {
	if n.Channel.Teams == nil || n.Channel.Teams.Webhook == "" {
		return queue.Sent{}, fmt.Errorf("teams channel %q: no webhook URL", n.Channel.Name)
	}
	target := n.Channel.Teams.Webhook
	shown := hostOnly(target)
	body, err := json.Marshal(m)
	if err != nil {
		return queue.Sent{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return queue.Sent{}, fmt.Errorf("teams channel %q (%s): the webhook URL is not usable", n.Channel.Name, shown)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "approvals")
	resp, err := t.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error repeats the whole URL
		}
		return queue.Sent{}, fmt.Errorf("teams channel %q (%s): %s", n.Channel.Name, shown, strings.ReplaceAll(err.Error(), target, shown))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return queue.Sent{}, nil
	case resp.StatusCode == http.StatusTooManyRequests:
		err := fmt.Errorf("teams channel %q (%s): answered %s", n.Channel.Name, shown, resp.Status)
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			return queue.Sent{}, &queue.RetryAfterError{After: time.Duration(s) * time.Second, Err: err}
		}
		return queue.Sent{}, err
	}
	return queue.Sent{}, fmt.Errorf("teams channel %q (%s): answered %s: %s", n.Channel.Name, shown, resp.Status, strings.TrimSpace(string(snippet)))
}

// Update tells of a decision with a new card: a Workflows webhook cannot change a card it
// posted.
func (t *Notifier) Update(ctx context.Context, n queue.Notification, _ []queue.ChannelMessage, m Message) (queue.Sent, error) {
	return t.Send(ctx, n, m)
}

// hostOnly is a webhook URL as errors show it: scheme and host, the path elided.
func hostOnly(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(the webhook URL)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// outcome says who decided what, and how it ended.
func outcome(a *queue.Action) string {
	s := strings.ReplaceAll(string(a.State), "_", " ")
	s = strings.ToUpper(s[:1]) + s[1:]
	if a.DecidedBy != nil && a.State != queue.StateExpired {
		s += " (decided by " + strings.TrimPrefix(*a.DecidedBy, "user:") + ")"
	}
	if a.DecidedAt != nil {
		s += " at " + a.DecidedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	if a.DecisionNote != nil && *a.DecisionNote != "" {
		s += ": " + cut(*a.DecisionNote, 500)
	}
	return s
}

func cut(s string, limit int) string {
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit]) + "…"
}
