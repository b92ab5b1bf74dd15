// Package slack is the Slack notification channel and the Slack side of deciding there: it
// posts a Block Kit message with approve / reject / request changes buttons for each pending
// action, replaces every such message once the action is decided, and verifies and parses the
// interactions Slack sends back. It speaks Slack's Web API through github.com/slack-go/slack.
package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// DefaultAPIURL is Slack's Web API; APPROVALS_SLACK_API_URL overrides it (tests).
const DefaultAPIURL = "https://slack.com/api/"

// Config sets up a Client.
type Config struct {
	BotToken  string // APPROVALS_SLACK_BOT_TOKEN (xoxb-…)
	APIURL    string // APPROVALS_SLACK_API_URL; DefaultAPIURL when empty
	PublicURL string // APPROVALS_PUBLIC_URL, the base of the link to the action page
	// Messages records the ts of every message posted for an action, so that a decision can
	// update them all from any server process.
	Messages queue.SlackMessages
	// HTTPClient sends the requests; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock of SlackMessage.PostedAt; nil means time.Now.
	Now func() time.Time
	// Actions, when set, is read again once a message with buttons is
	// recorded: a decision whose update ran (in another process) before
	// the message was recorded could not update it, so the poster does.
	Actions ActionReader
	// Tools, when set, is the tools file in force: a message offers
	// "Approve + similar" only for a tool whose grants it allows.
	Tools func() *classify.Registry
}

// ActionReader reads an action as it is now (the store, queue.Reader).
type ActionReader interface {
	ActionGetByID(ctx context.Context, id string) (*queue.Action, error)
}

// Client posts and updates approval messages (it is the queue.Notifier of Slack channels),
// opens the note modal and answers interactions.
type Client struct {
	api       *slackapi.Client
	http      *http.Client
	messages  queue.SlackMessages
	actions   ActionReader
	publicURL string
	now       func() time.Time
	tools     func() *classify.Registry
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.BotToken == "" {
		return nil, errors.New("slack channel: APPROVALS_SLACK_BOT_TOKEN is not set")
	}
	if cfg.PublicURL == "" {
		return nil, errors.New("slack channel: APPROVALS_PUBLIC_URL is not set")
	}
	if cfg.Messages == nil {
		return nil, errors.New("slack channel: no store for the posted messages")
	}
	apiURL := cfg.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	// slack-go joins the method name to the URL as it is: "…/api" + "chat.postMessage"
	// would miss the slash.
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	hc := http.Client{Timeout: 10 * time.Second}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = bearer{token: cfg.BotToken, prefix: apiURL, next: next}
	c := &Client{
		api:       slackapi.New(cfg.BotToken, slackapi.OptionAPIURL(apiURL), slackapi.OptionHTTPClient(&hc)),
		http:      &hc,
		messages:  cfg.Messages,
		actions:   cfg.Actions,
		publicURL: strings.TrimRight(cfg.PublicURL, "/"),
		now:       cfg.Now,
		tools:     cfg.Tools,
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// bearer sends the bot token as Slack asks new apps to: an Authorization header. slack-go
// puts it in the form body of some methods (chat.postMessage, chat.update), which Slack
// still accepts; the header makes every method alike. Only requests to the API get it: a
// response_url is another host that must never see the token.
type bearer struct {
	token, prefix string
	next          http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.String(), b.prefix) && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// Notify tells n.Channel.Slack of n. A pending, reminder or escalated event posts a message
// (with buttons while the action is still pending) and records its ts; a decision or outcome
// event rewrites every message posted to that channel for the action, without buttons.
// Slack's {"ok": false} is an error and its HTTP 429 a *queue.RetryAfterError.
func (c *Client) Notify(ctx context.Context, n queue.Notification) error {
	if n.Action == nil {
		return fmt.Errorf("notification %s: no action", n.ID)
	}
	if n.Channel.Slack == nil || n.Channel.Slack.Channel == "" {
		return fmt.Errorf("slack channel %q: no Slack channel id", n.Channel.Name)
	}
	channel := n.Channel.Slack.Channel
	switch n.Type {
	case classify.EventActionPending, classify.EventActionReminder, classify.EventActionEscalated:
		return c.post(ctx, channel, n, true)
	case classify.EventTicketOpened:
		// A ticket is for operators, not a decision: a message of its own, not recorded, so
		// the action's later outcome does not overwrite it.
		return c.post(ctx, channel, n, false)
	default:
		return c.update(ctx, channel, n)
	}
}

// post sends a new message for n; record keeps its ts for later updates.
func (c *Client) post(ctx context.Context, channel string, n queue.Notification, record bool) error {
	m := c.render(n)
	gotChannel, ts, err := c.api.PostMessageContext(ctx, channel, m.options()...)
	if err := apiError("chat.postMessage", err); err != nil {
		return err
	}
	if ts == "" {
		return errNoTS("chat.postMessage")
	}
	if !record {
		return nil
	}
	if gotChannel == "" {
		gotChannel = channel
	}
	// If recording fails the outbox retries and posts again: a duplicate message, which is
	// the at-least-once price; a message never recorded would keep its buttons for good.
	if err := c.messages.SlackMessageAdd(ctx, queue.SlackMessage{
		ActionID: n.Action.ID, Channel: gotChannel, TS: ts, PostedAt: c.now(),
	}); err != nil {
		return fmt.Errorf("record Slack message %s of action %s: %w", ts, n.Action.ID, err)
	}
	if c.actions == nil || n.Action.State != queue.StatePending {
		return nil
	}
	// Posted with buttons: if the action was decided meanwhile, its
	// decision's update may have run before this message was recorded, and
	// so missed it. Update it now; chat.update is idempotent.
	cur, err := c.actions.ActionGetByID(ctx, n.Action.ID)
	if err != nil || cur.State == queue.StatePending {
		return nil // the decision's own update (retried) will find the message
	}
	n.Action = cur
	d := c.render(n)
	_, _, _, err = c.api.UpdateMessageContext(ctx, gotChannel, ts, d.options()...)
	return apiError("chat.update", err)
}

// update rewrites every message posted to channel for the action. A channel that never got
// one (it subscribes to decisions only) gets the decided form as a new message.
func (c *Client) update(ctx context.Context, channel string, n queue.Notification) error {
	all, err := c.messages.SlackMessageList(ctx, n.Action.ID)
	if err != nil {
		return fmt.Errorf("list Slack messages of action %s: %w", n.Action.ID, err)
	}
	var mine []queue.SlackMessage
	for _, m := range all {
		if m.Channel == channel {
			mine = append(mine, m)
		}
	}
	if len(mine) == 0 {
		return c.post(ctx, channel, n, true)
	}
	m := c.render(n)
	// Every message is rewritten on every try: chat.update is idempotent, so a retry after a
	// failure part-way through does no harm.
	for _, sm := range mine {
		_, ts, _, err := c.api.UpdateMessageContext(ctx, sm.Channel, sm.TS, m.options()...)
		if err := apiError("chat.update", err); err != nil {
			return err
		}
		if ts == "" {
			return errNoTS("chat.update")
		}
	}
	return nil
}

// apiError turns slack-go's error into ours: a rate limit becomes a *queue.RetryAfterError.
func apiError(method string, err error) error {
	var rl *slackapi.RateLimitedError
	switch {
	case errors.As(err, &rl):
		return &queue.RetryAfterError{After: rl.RetryAfter, Err: fmt.Errorf("slack %s: rate limited", method)}
	case err != nil:
		return fmt.Errorf("slack %s: %w", method, err)
	}
	return nil
}

// errNoTS is an answer without a ts: slack-go takes {"ok": false} without an error text for
// success, and a message we cannot update later is not delivered.
func errNoTS(method string) error {
	return fmt.Errorf("slack %s: answered without ok and ts", method)
}
