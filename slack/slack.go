// Package slack is the Slack notification channel and the Slack side of deciding there: it
// posts a Block Kit message with approve / reject / request changes buttons for each pending
// action, replaces every such message once the action is decided (a queue.Channel, which
// maintenance.ChannelNotifier drives), and verifies and parses the interactions Slack sends
// back. It speaks Slack's Web API through github.com/slack-go/slack.
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
	"github.com/approvals/approvals/tracing"
)

// DefaultAPIURL is Slack's Web API; APPROVALS_SLACK_API_URL overrides it (tests).
const DefaultAPIURL = "https://slack.com/api/"

// Config sets up a Client.
type Config struct {
	BotToken  string // APPROVALS_SLACK_BOT_TOKEN (xoxb-…)
	APIURL    string // APPROVALS_SLACK_API_URL; DefaultAPIURL when empty
	PublicURL string // APPROVALS_PUBLIC_URL, the base of the link to the action page
	// HTTPClient sends the requests; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
	// Tools, when set, is the tools file in force: a message offers
	// "Approve + similar" only for a tool whose grants it allows.
	Tools func() *classify.Registry
}

// ActionReader reads an action as it is now (the store, queue.Reader); a
// refusal whose cause is unexpected pings it (queue.ErrorOf).
type ActionReader interface {
	ActionGetByID(ctx context.Context, id string) (*queue.Action, error)
	Ping(ctx context.Context) error
}

// Client posts and updates approval messages (it is the queue.Channel of Slack channels),
// opens the note modal and answers interactions.
type Client struct {
	api       *slackapi.Client
	http      *http.Client
	publicURL string
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
	// Each API call carries the traceparent of the span that sent it.
	hc.Transport = bearer{token: cfg.BotToken, prefix: apiURL, next: tracing.Transport(next)}
	return &Client{
		api:       slackapi.New(cfg.BotToken, slackapi.OptionAPIURL(apiURL), slackapi.OptionHTTPClient(&hc)),
		http:      &hc,
		publicURL: strings.TrimRight(cfg.PublicURL, "/"),
		tools:     cfg.Tools,
	}, nil
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

// slackChannel is the Slack channel id n goes to.
func slackChannel(n queue.Notification) (string, error) {
	if n.Channel.Slack == nil || n.Channel.Slack.Channel == "" {
		return "", fmt.Errorf("slack channel %q: no Slack channel id", n.Channel.Name)
	}
	return n.Channel.Slack.Channel, nil
}

// Send posts m, a pending, reminder or escalated message (with buttons while the action is
// pending), whose ts is recorded for the decision to update. A ticket is for operators, not
// a decision: a message of its own, not recorded, so the action's later outcome does not
// overwrite it. Slack's {"ok": false} is an error and its HTTP 429 a
// *queue.RetryAfterError.
func (c *Client) Send(ctx context.Context, n queue.Notification, m Message) (queue.Sent, error) {
	channel, err := slackChannel(n)
	if err != nil {
		return queue.Sent{}, err
	}
	gotChannel, ts, err := c.api.PostMessageContext(ctx, channel, m.options()...)
	if err := apiError("chat.postMessage", err); err != nil {
		return queue.Sent{}, err
	}
	if ts == "" {
		return queue.Sent{}, errNoTS("chat.postMessage")
	}
	if n.Type == classify.EventTicketOpened {
		return queue.Sent{}, nil
	}
	if gotChannel == "" {
		gotChannel = channel
	}
	return queue.Sent{Address: gotChannel, Ref: ts}, nil
}

// Update rewrites every message posted to the channel for the action with m, the decided
// form without buttons. A channel that never got one (it subscribes to decisions only) gets
// the decided form as a new message.
func (c *Client) Update(ctx context.Context, n queue.Notification, sent []queue.ChannelMessage, m Message) (queue.Sent, error) {
	if len(sent) == 0 {
		return c.Send(ctx, n, m)
	}
	// Every message is rewritten on every try: chat.update is idempotent, so a retry after a
	// failure part-way through does no harm.
	for _, sm := range sent {
		_, ts, _, err := c.api.UpdateMessageContext(ctx, sm.Address, sm.Ref, m.options()...)
		if err := apiError("chat.update", err); err != nil {
			return queue.Sent{}, err
		}
		if ts == "" {
			return queue.Sent{}, errNoTS("chat.update")
		}
	}
	return queue.Sent{}, nil
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
