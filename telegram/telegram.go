// Package telegram is the Telegram notification channel and the Telegram side of deciding
// there, over the Bot API (HTTPS and JSON, nothing beyond net/http): each pending action is a
// message with an inline keyboard (Approve, Reject, Open), every such message is edited once
// the action is decided anywhere (a queue.Channel, which maintenance.ChannelNotifier
// drives), and the webhook (decide.go) takes the buttons and the replies that give a
// rejection's reason back.
package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
)

// DefaultAPIURL is the Bot API; APPROVALS_TELEGRAM_API_URL overrides it (tests).
const DefaultAPIURL = "https://api.telegram.org"

// Config sets up a Client.
type Config struct {
	BotToken  string // APPROVALS_TELEGRAM_BOT_TOKEN (123456:ABC…)
	APIURL    string // APPROVALS_TELEGRAM_API_URL; DefaultAPIURL when empty
	PublicURL string // APPROVALS_PUBLIC_URL, the base of the link to the action page
	// HTTPClient sends the requests; nil means one with a 10 s timeout.
	HTTPClient *http.Client
}

// Client speaks the Bot API as the bot of the token.
type Client struct {
	base      string // {APIURL}/bot{token}/, never shown
	token     string
	botID     int64 // the number before the token's colon: the bot's own user id
	publicURL string
	http      *http.Client
}

// botToken is a Bot API token as BotFather hands it out: the bot's id, a colon, a secret.
var botToken = regexp.MustCompile(`^([0-9]{1,20}):[A-Za-z0-9_-]{20,}$`)

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	m := botToken.FindStringSubmatch(cfg.BotToken)
	switch {
	case cfg.BotToken == "":
		return nil, errors.New("telegram channel: APPROVALS_TELEGRAM_BOT_TOKEN is not set")
	case m == nil:
		return nil, errors.New("APPROVALS_TELEGRAM_BOT_TOKEN is not a bot token such as 123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11 (BotFather's /newbot)")
	case cfg.PublicURL == "":
		return nil, errors.New("telegram channel: APPROVALS_PUBLIC_URL is not set")
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	api := cfg.APIURL
	if api == "" {
		api = DefaultAPIURL
	}
	c := &Client{base: strings.TrimRight(api, "/") + "/bot" + cfg.BotToken + "/", token: cfg.BotToken, botID: id,
		publicURL: strings.TrimRight(cfg.PublicURL, "/")}
	hc := http.Client{Timeout: 10 * time.Second}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	// Each API call carries the traceparent of the span that sent it.
	hc.Transport = tracing.Transport(hc.Transport)
	c.http = &hc
	return c, nil
}

// BotID is the bot's own user id, the sender of the messages it sent.
func (c *Client) BotID() int64 { return c.botID }

// APIError is a Bot API answer {"ok": false}.
type APIError struct {
	Method      string
	Code        int    // error_code
	Description string // description
}

func (e *APIError) Error() string {
	return fmt.Sprintf("telegram %s: %d %s", e.Method, e.Code, e.Description)
}

// call posts params as JSON to method and decodes the result into out (when not nil). An
// {"ok": false} answer is an *APIError; a 429 a *queue.RetryAfterError with the delay
// Telegram gives (parameters.retry_after).
func (c *Client) call(ctx context.Context, method string, params, out any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+method, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, c.hideToken(err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, c.hideToken(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("telegram %s: read the answer: %w", method, err)
	}
	var answer struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return fmt.Errorf("telegram %s: answered %s, not the Bot API's JSON", method, resp.Status)
	}
	if !answer.OK {
		apiErr := &APIError{Method: method, Code: answer.ErrorCode, Description: answer.Description}
		if answer.ErrorCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusTooManyRequests {
			return &queue.RetryAfterError{After: time.Duration(answer.Parameters.RetryAfter) * time.Second, Err: apiErr}
		}
		return apiErr
	}
	if out != nil {
		if err := json.Unmarshal(answer.Result, out); err != nil {
			return fmt.Errorf("telegram %s: result: %w", method, err)
		}
	}
	return nil
}

// hideToken keeps the bot token, which is in every method's URL, out of errors and logs.
func (c *Client) hideToken(err error) error {
	return errors.New(strings.ReplaceAll(err.Error(), c.token, "REDACTED"))
}

// Button is one inline keyboard button: a callback (CallbackData) or a link (URL).
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
}

// sentMessage is what the Bot API answers for a message sent or edited.
type sentMessage struct {
	MessageID int64 `json:"message_id"`
}

// SendMessage sends text (HTML) to chat, with keyboard's buttons when not nil, and returns
// the message id.
func (c *Client) SendMessage(ctx context.Context, chat, text string, keyboard [][]Button) (int64, error) {
	params := map[string]any{"chat_id": chat, "text": text, "parse_mode": "HTML",
		"link_preview_options": map[string]bool{"is_disabled": true}}
	if keyboard != nil {
		params["reply_markup"] = map[string]any{"inline_keyboard": keyboard}
	}
	var m sentMessage
	if err := c.call(ctx, "sendMessage", params, &m); err != nil {
		return 0, err
	}
	if m.MessageID == 0 {
		return 0, errors.New("telegram sendMessage: answered without a message_id")
	}
	return m.MessageID, nil
}

// sendForceReply sends text (HTML) to chat with Telegram's force-reply markup (selective:
// shown to the users the text mentions), and returns the message id.
func (c *Client) sendForceReply(ctx context.Context, chat, text, placeholder string) (int64, error) {
	var m sentMessage
	if err := c.call(ctx, "sendMessage", map[string]any{"chat_id": chat, "text": text, "parse_mode": "HTML",
		"reply_markup": map[string]any{"force_reply": true, "selective": true, "input_field_placeholder": placeholder}}, &m); err != nil {
		return 0, err
	}
	if m.MessageID == 0 {
		return 0, errors.New("telegram sendMessage: answered without a message_id")
	}
	return m.MessageID, nil
}

// EditMessageText replaces a message's text (HTML) and removes its keyboard. Editing to
// what it says already is success: a retry after a failure part-way through does no harm.
func (c *Client) EditMessageText(ctx context.Context, chat string, messageID int64, text string) error {
	err := c.call(ctx, "editMessageText", map[string]any{"chat_id": chat, "message_id": messageID, "text": text,
		"parse_mode": "HTML", "link_preview_options": map[string]bool{"is_disabled": true}}, nil)
	var apiErr *APIError
	if errors.As(err, &apiErr) && strings.Contains(apiErr.Description, "message is not modified") {
		return nil
	}
	return err
}

// AnswerCallbackQuery ends the spinner of a pressed button; text, when not empty, is shown to
// the user who pressed it (as an alert when alert is set), cut to the Bot API's 200
// characters: Telegram refuses a longer one, and the user would be told nothing.
func (c *Client) AnswerCallbackQuery(ctx context.Context, id, text string, alert bool) error {
	params := map[string]any{"callback_query_id": id}
	if text != "" {
		params["text"], params["show_alert"] = cutUTF16(text, maxCallbackText), alert
	}
	return c.call(ctx, "answerCallbackQuery", params, nil)
}

// maxCallbackText is the most text answerCallbackQuery takes.
const maxCallbackText = 200

// cutUTF16 cuts s to at most limit UTF-16 code units (as Telegram counts characters), ending
// it with "…" when it cuts.
func cutUTF16(s string, limit int) string {
	units := 0
	for i, r := range s {
		units += utf16.RuneLen(r)
		if units > limit-1 { // room for the "…"
			if len(utf16.Encode([]rune(s))) <= limit {
				return s
			}
			return s[:i] + "…"
		}
	}
	return s
}

// SetWebhook registers url as the bot's webhook, with secret in every request's
// X-Telegram-Bot-Api-Secret-Token header; only buttons and messages are sent to it.
func (c *Client) SetWebhook(ctx context.Context, url, secret string) error {
	return c.call(ctx, "setWebhook", map[string]any{"url": url, "secret_token": secret,
		"allowed_updates": []string{"message", "callback_query"}}, nil)
}

// chat is the chat n goes to.
func chat(n queue.Notification) (string, error) {
	if n.Channel.Telegram == nil || n.Channel.Telegram.ChatID == "" {
		return "", fmt.Errorf("telegram channel %q: no chat id", n.Channel.Name)
	}
	return n.Channel.Telegram.ChatID, nil
}

// Send sends m. A message about an action is recorded by its message id, for the decision to
// edit; a ticket is for operators, a message of its own, not recorded.
func (c *Client) Send(ctx context.Context, n queue.Notification, m Message) (queue.Sent, error) {
	to, err := chat(n)
	if err != nil {
		return queue.Sent{}, err
	}
	id, err := c.SendMessage(ctx, to, m.Text, m.Keyboard)
	if err != nil {
		return queue.Sent{}, err
	}
	if n.Type == classify.EventTicketOpened {
		return queue.Sent{}, nil
	}
	return queue.Sent{Address: to, Ref: strconv.FormatInt(id, 10)}, nil
}

// Update edits every message sent to the chat for the action to m, the decided form without
// buttons; a chat that never got one (it subscribes to decisions only) gets m as a new
// message.
func (c *Client) Update(ctx context.Context, n queue.Notification, sent []queue.ChannelMessage, m Message) (queue.Sent, error) {
	if len(sent) == 0 {
		return c.Send(ctx, n, m)
	}
	for _, s := range sent {
		id, err := strconv.ParseInt(s.Ref, 10, 64)
		if err != nil {
			return queue.Sent{}, fmt.Errorf("telegram message %q of action %s: not a message id", s.Ref, s.ActionID)
		}
		if err := c.EditMessageText(ctx, s.Address, id, m.Text); err != nil {
			return queue.Sent{}, err
		}
	}
	return queue.Sent{}, nil
}
