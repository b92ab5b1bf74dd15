package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/chatdecide"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
)

// SecretHeader carries the secret given to setWebhook in every update Telegram sends.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// validSecret is what setWebhook accepts as a secret_token.
var validSecret = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// ValidateSecret checks APPROVALS_TELEGRAM_SECRET as Telegram would.
func ValidateSecret(s string) error {
	if !validSecret.MatchString(s) {
		return errors.New("APPROVALS_TELEGRAM_SECRET must be 1 to 256 characters of A-Z, a-z, 0-9, _ and - (Telegram's secret_token)")
	}
	return nil
}

// Staff maps a Telegram user to a staff user by the id set with approvals user add
// --telegram-id (or on the admin users page).
type Staff interface {
	UserGetByTelegramID(ctx context.Context, telegramID int64) (*accounts.User, error)
}

// ActionReader reads an action as it is now (the store, queue.Reader); a
// refusal whose cause is unexpected pings it (queue.ErrorOf).
type ActionReader interface {
	ActionGetByID(ctx context.Context, id string) (*queue.Action, error)
	Ping(ctx context.Context) error
}

// WebhookConfig sets up the webhook.
type WebhookConfig struct {
	Secret  string // APPROVALS_TELEGRAM_SECRET
	Client  *Client
	Service *queue.Service
	Actions ActionReader
	// Prompts records each reason prompt as it is sent; a reply decides only when it
	// answers one of them (the store, queue.ReasonPrompts).
	Prompts queue.ReasonPrompts
	Staff   Staff
	Logger  *slog.Logger
}

// Webhook serves POST /integrations/telegram/webhook: the buttons of the approval messages
// and the replies that give a rejection's reason. It has no session and no CSRF token: the
// request is Telegram's, and the secret header is what authenticates it.
type Webhook struct {
	cfg  WebhookConfig
	flow chatdecide.Flow
	// replies counts the answers sent to Telegram after the webhook answered.
	replies sync.WaitGroup
}

// NewWebhook checks cfg.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if err := ValidateSecret(cfg.Secret); err != nil {
		return nil, err
	}
	if cfg.Client == nil || cfg.Service == nil || cfg.Actions == nil || cfg.Prompts == nil || cfg.Staff == nil {
		return nil, errors.New("telegram webhook: Client, Service, Actions, Prompts and Staff are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Webhook{cfg: cfg, flow: chatdecide.Flow{Service: cfg.Service, Storage: cfg.Actions, Name: "Telegram", Logger: cfg.Logger}}, nil
}

// maxUpdate bounds what is read of an update.
const maxUpdate = 1 << 20

// Update is the part of a Bot API update the webhook reads.
type Update struct {
	UpdateID      int64          `json:"update_id"`
	Message       *Msg           `json:"message"`
	CallbackQuery *CallbackQuery `json:"callback_query"`
}

// Msg is a message of an update.
type Msg struct {
	MessageID int64 `json:"message_id"`
	From      *User `json:"from"`
	Chat      struct {
		ID int64 `json:"id"`
	} `json:"chat"`
	Text           string `json:"text"`
	ReplyToMessage *Msg   `json:"reply_to_message"`
}

// User is a Telegram user.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
}

// CallbackQuery is a pressed button.
type CallbackQuery struct {
	ID      string `json:"id"`
	From    User   `json:"from"`
	Message *Msg   `json:"message"`
	Data    string `json:"data"`
}

// ServeHTTP answers 401 (and changes nothing) unless the secret header is the secret; any
// update with it is answered 200, whatever it asks, because Telegram sends again anything
// else. What a user is told (a refusal, the question for a reason) goes to Telegram after the
// answer. A decision takes the same exactly-once path as the dashboard's, so an update sent
// twice decides nothing twice.
func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(SecretHeader)), []byte(h.cfg.Secret)) != 1 {
		http.Error(w, "the "+SecretHeader+" header is not this server's secret", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxUpdate))
	var u Update
	if err == nil {
		err = json.Unmarshal(body, &u)
	}
	if err != nil {
		h.cfg.Logger.Warn("telegram update not understood; nothing changed", "err", err)
		w.WriteHeader(http.StatusOK)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	switch {
	case u.CallbackQuery != nil:
		h.button(ctx, *u.CallbackQuery)
	case u.Message != nil && u.Message.ReplyToMessage != nil:
		h.reply(ctx, *u.Message)
	}
	w.WriteHeader(http.StatusOK)
}

// Wait waits for the answers under way (shutdown, tests).
func (h *Webhook) Wait() { h.replies.Wait() }

// later runs fn after the answer, so that a slow Bot API does not hold Telegram's request.
func (h *Webhook) later(what string, fn func(ctx context.Context) error) {
	h.replies.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := fn(ctx); err != nil {
			h.cfg.Logger.Warn("telegram: "+what, "err", err)
		}
	})
}

// decider resolves the Telegram user to the staff member who decides, or says why nobody
// does: roles here, the tool's approvers inside the deciding transaction.
func (h *Webhook) decider(ctx context.Context, from User) (string, string) {
	return h.flow.Who(ctx, fmt.Sprintf("id %d", from.ID), func(ctx context.Context) (*accounts.User, error) {
		return h.cfg.Staff.UserGetByTelegramID(ctx, from.ID)
	}, "telegram_user", from.ID)
}

// button handles a pressed button and answers it.
func (h *Webhook) button(ctx context.Context, q CallbackQuery) {
	text, alert := h.press(ctx, q)
	h.later("answer the button", func(ctx context.Context) error {
		return h.cfg.Client.AnswerCallbackQuery(ctx, q.ID, text, alert)
	})
}

// press decides or asks for the reason, and returns what the user is told.
func (h *Webhook) press(ctx context.Context, q CallbackQuery) (string, bool) {
	kind, id, _ := strings.Cut(q.Data, ":")
	if planID, ok := strings.CutPrefix(id, queue.PlanActorPrefix); ok && kind == CallbackApprove && queue.ValidID(planID) {
		by, refusal := h.decider(ctx, q.From)
		if refusal != "" {
			return refusal, true
		}
		return h.pressPlan(ctx, q, by, planID)
	}
	if (kind != CallbackApprove && kind != CallbackReject) || !queue.ValidID(id) {
		return "This button is not one of approvals'.", true
	}
	by, refusal := h.decider(ctx, q.From)
	if refusal != "" {
		return refusal, true
	}
	a, err := h.cfg.Actions.ActionGetByID(ctx, id)
	if err != nil {
		return h.refusal(ctx, q.From.ID, id, err), true
	}
	if kind == CallbackReject {
		if a.State != queue.StatePending {
			return fmt.Sprintf("Nothing was changed: the action is %s already.", a.State), true
		}
		if refusal := h.flow.MayNotDecide(ctx, a, by); refusal != "" {
			return refusal, true
		}
		chatID := strconv.FormatInt(q.From.ID, 10)
		if q.Message != nil {
			chatID = strconv.FormatInt(q.Message.Chat.ID, 10)
		}
		prompt := fmt.Sprintf(`<a href="tg://user?id=%d">%s</a>, why is “%s” rejected? Reply to this message with the reason; the agent sees it.`,
			q.From.ID, esc(q.From.FirstName), esc(preview.Headline(a)))
		h.later("ask for the reason", func(ctx context.Context) error {
			return h.askReason(ctx, chatID, prompt, a.ID, q.From.ID)
		})
		return "Reply to the message that asks for the reason.", false
	}
	if refusal := h.flow.Offer(ctx, a, by, preview.Hidden(a, room), h.cfg.Client.publicURL+"/actions/"+a.ID); refusal != "" {
		return refusal, true
	}
	text, refused := h.flow.Approve(ctx, queue.DecideRequest{ID: id, To: queue.StateApproved, By: by, Note: "via Telegram", Channel: "telegram"},
		"telegram_user", q.From.ID, "action", id)
	if text == "" {
		text = "Approved."
	}
	return text, refused
}

// askReason sends the question for a rejection's reason to chat, asked of user, and records
// it by its message_id: the reply to that message, by that user, is what decides. A question
// that cannot be recorded would be answered in vain, so it is edited to say so.
func (h *Webhook) askReason(ctx context.Context, chat, prompt, actionID string, user int64) error {
	id, err := h.cfg.Client.sendForceReply(ctx, chat, prompt, "Why is it rejected?")
	if err != nil {
		return err
	}
	err = h.cfg.Prompts.ReasonPromptAdd(ctx, queue.ReasonPrompt{Kind: classify.KindTelegram, Address: chat,
		Ref: strconv.FormatInt(id, 10), ActionID: actionID, Asked: strconv.FormatInt(user, 10), SentAt: h.cfg.Service.Now()})
	if err == nil {
		return nil
	}
	if editErr := h.cfg.Client.EditMessageText(ctx, chat, id, esc("approvals could not record this question, so a reply to it would change nothing. Press Reject again, or reject on the dashboard.")); editErr != nil {
		err = errors.Join(err, editErr)
	}
	return fmt.Errorf("record the reason prompt of action %s: %w", actionID, err)
}

// reply decides with the reason given in a reply to one of the bot's reason prompts, as
// recorded when it was sent (chat and message_id), by the user it asked. What the answered
// message says is never read: an approval message shows an agent's text, which may look like
// anything. A reply to any other message is not ours, and changes nothing.
func (h *Webhook) reply(ctx context.Context, m Msg) {
	to := m.ReplyToMessage
	if to.From == nil || !to.From.IsBot || to.From.ID != h.cfg.Client.BotID() || m.From == nil {
		return
	}
	p, err := h.cfg.Prompts.ReasonPromptGet(ctx, queue.ReasonPromptGetParams{Kind: classify.KindTelegram,
		Address: strconv.FormatInt(m.Chat.ID, 10), Ref: strconv.FormatInt(to.MessageID, 10)})
	if errors.Is(err, queue.ErrNotFound) {
		return // a reply to an approval message, or to another of the bot's messages
	}
	text := ""
	switch {
	case err != nil:
		h.cfg.Logger.Warn("telegram: look up the reason prompt", "chat", m.Chat.ID, "message", to.MessageID, "err", err)
		text = "Nothing was changed: approvals could not look up the question you answered; try again or reject on the dashboard."
	case p.Asked != strconv.FormatInt(m.From.ID, 10):
		text = "Nothing was changed: this question was asked of someone else. To reject the action yourself, press its Reject button and reply to the question you are asked."
	default:
		if by, refusal := h.decider(ctx, *m.From); refusal != "" {
			text = refusal
		} else if _, err := h.cfg.Service.Decide(ctx, queue.DecideRequest{ID: p.ActionID, To: queue.StateRejected, By: by, Note: m.Text, Channel: "telegram"}); err != nil {
			text = h.refusal(ctx, m.From.ID, p.ActionID, err)
		}
	}
	if text == "" {
		return // every message of the action is edited to say who rejected it, and why
	}
	chatID := strconv.FormatInt(m.Chat.ID, 10)
	h.later("tell why nothing changed", func(ctx context.Context) error {
		return h.cfg.Client.call(ctx, "sendMessage", map[string]any{"chat_id": chatID, "text": esc(text), "parse_mode": "HTML",
			"reply_parameters": map[string]any{"message_id": m.MessageID, "allow_sending_without_reply": true}}, nil)
	})
}

// refusal words a failed decision for the user.
func (h *Webhook) refusal(ctx context.Context, user int64, action string, err error) string {
	return h.flow.Refusal(ctx, err, "telegram_user", user, "action", action)
}
