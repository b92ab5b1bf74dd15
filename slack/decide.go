package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/chatdecide"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// Staff maps a Slack user to a staff user by the Slack id set with
// approvals user add --slack-id (or on the admin users page).
type Staff interface {
	UserGetBySlackID(ctx context.Context, slackID string) (*accounts.User, error)
}

// InteractionsConfig sets up the interactions endpoint.
type InteractionsConfig struct {
	SigningSecret string // APPROVALS_SLACK_SIGNING_SECRET
	// TeamID and AppID, when set (APPROVALS_SLACK_TEAM_ID, APPROVALS_SLACK_APP_ID), are the
	// only workspace and app whose interactions decide anything: a signing secret shared by
	// an app installed in several workspaces, or by several apps, signs theirs too.
	TeamID, AppID string
	Client        *Client
	Service       *queue.Service
	// Actions reads an action before the note modal opens.
	Actions ActionReader
	Staff   Staff
	// Now is the clock the request timestamp is judged by; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Interactions serves POST /integrations/slack/interactions: the buttons of the approval
// messages and the submissions of the note modal. It has no session and no CSRF token: the
// request is Slack's, and Slack's signature is what authenticates it.
type Interactions struct {
	cfg  InteractionsConfig
	flow chatdecide.Flow
	// replies counts the ephemeral replies sent after the answer.
	replies sync.WaitGroup
}

// NewInteractions checks cfg.
func NewInteractions(cfg InteractionsConfig) (*Interactions, error) {
	switch {
	case cfg.SigningSecret == "":
		return nil, errors.New("slack interactions: APPROVALS_SLACK_SIGNING_SECRET is not set")
	case cfg.Client == nil, cfg.Service == nil, cfg.Actions == nil, cfg.Staff == nil:
		return nil, errors.New("slack interactions: Client, Service, Actions and Staff are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Interactions{cfg: cfg, flow: chatdecide.Flow{Service: cfg.Service, Storage: cfg.Actions, Name: "Slack", Logger: cfg.Logger}}, nil
}

// maxInteractionBody bounds what is read before the signature is checked. Slack's payloads
// (a message's blocks, a modal's state) stay far below it.
const maxInteractionBody = 1 << 20

// answerWithin is the time given to the work done before answering: Slack shows the user an
// error when the answer takes longer than 3 seconds.
const answerWithin = 2500 * time.Millisecond

// ServeHTTP verifies the request (401 when it is not Slack's, before anything is read from
// storage), then decides or opens the note modal, and answers 200 whatever the outcome:
// refusals are told to the user in Slack, not in the status. A decision goes through the
// same exactly-once path as the dashboard's, so Slack retrying a request decides nothing
// twice.
func (h *Interactions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInteractionBody))
	if err != nil {
		http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	if err := VerifyRequest(h.cfg.SigningSecret, r.Header, body, h.cfg.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	in, err := ParseInteraction(body)
	switch {
	case errors.Is(err, ErrUnsupportedInteraction):
		w.WriteHeader(http.StatusOK)
		return
	case err != nil:
		// Signed by Slack, so answered 200 like every valid request; what
		// it lacked is logged, and nothing changes.
		h.cfg.Logger.Warn("slack interaction not understood; nothing changed", "err", err)
		w.WriteHeader(http.StatusOK)
		return
	}
	if (h.cfg.TeamID != "" && in.TeamID != h.cfg.TeamID) || (h.cfg.AppID != "" && in.AppID != h.cfg.AppID) {
		// Signed, so answered 200; from elsewhere, so it decides nothing.
		h.cfg.Logger.Warn("slack interaction from another workspace or app; nothing changed",
			"team_id", in.TeamID, "api_app_id", in.AppID, "want_team_id", h.cfg.TeamID, "want_api_app_id", h.cfg.AppID)
		w.WriteHeader(http.StatusOK)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), answerWithin)
	defer cancel()
	switch in.Kind {
	case KindBlockActions:
		if text := h.button(ctx, in); text != "" {
			h.replyLater(in.ResponseURL, text)
		}
		w.WriteHeader(http.StatusOK)
	case KindViewSubmission:
		if text := h.submission(ctx, in); text != "" {
			// A submission has no response_url: the refusal stays in the open modal.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(ModalError(text))
			return
		}
		w.WriteHeader(http.StatusOK) // an empty 200 closes the modal
	}
}

// Wait waits for the ephemeral replies under way (shutdown, tests).
func (h *Interactions) Wait() { h.replies.Wait() }

// decider resolves the Slack user to the staff member who decides, or says why nobody does.
func (h *Interactions) decider(ctx context.Context, in Interaction) (string, string) {
	return h.flow.Who(ctx, in.UserID, func(ctx context.Context) (*accounts.User, error) {
		return h.cfg.Staff.UserGetBySlackID(ctx, in.UserID)
	}, "slack_user", in.UserID)
}

// button handles a pressed button and returns the ephemeral reply, if any.
func (h *Interactions) button(ctx context.Context, in Interaction) string {
	by, refusal := h.decider(ctx, in)
	if refusal != "" {
		return refusal
	}
	if id, ok := strings.CutPrefix(in.ActionID, queue.PlanActorPrefix); ok {
		return h.planButton(ctx, in, by, id)
	}
	if !queue.ValidID(in.ActionID) {
		return fmt.Sprintf("Nothing was changed: action %q does not exist.", in.ActionID)
	}
	if in.Button == ButtonApprove || in.Button == ButtonApproveSimilar {
		a, err := h.cfg.Actions.ActionGetByID(ctx, in.ActionID)
		if err != nil {
			return h.refusal(ctx, in, err)
		}
		if refusal := h.flow.Offer(ctx, a, by, hiddenParts(a), h.cfg.Client.publicURL+"/actions/"+a.ID); refusal != "" {
			return refusal
		}
		r := queue.DecideRequest{ID: in.ActionID, To: queue.StateApproved, By: by, Note: "via Slack", Channel: "slack"}
		if in.Button == ButtonApproveSimilar {
			// The same path as the dashboard's grant: the tool's limits
			// are checked there, and a refusal decides nothing.
			d, ok := h.cfg.Client.similarFor(a)
			if !ok {
				return fmt.Sprintf("Nothing was changed: tool %s takes no grants now; approve this action alone.", a.Tool)
			}
			r.Grant = &queue.GrantRequest{For: d}
			r.Note = "via Slack, with a grant of the similar ones for " + classify.FormatDuration(d)
		}
		// "": every message of the action is updated to say who approved it.
		text, _ := h.flow.Approve(ctx, r, "slack_user", in.UserID, "action", in.ActionID)
		return text
	}
	// Reject and request changes need a note: the modal asks for it. Who may decide is
	// checked first so that nobody types a note only to be refused; the decision itself
	// checks again.
	a, err := h.cfg.Actions.ActionGetByID(ctx, in.ActionID)
	if err != nil {
		return h.refusal(ctx, in, err)
	}
	if a.State != queue.StatePending {
		return fmt.Sprintf("Nothing was changed: the action is %s already (%s).", a.State, decidedBy(a))
	}
	if refusal := h.flow.MayNotDecide(ctx, a, by); refusal != "" {
		return refusal
	}
	if err := h.cfg.Client.OpenNoteModal(ctx, in.TriggerID, in.Button, a.ID); err != nil {
		h.cfg.Logger.Warn("slack interaction: open the note modal", "action", a.ID, "err", err)
		return "Slack did not open the form for the note; press the button again or decide on the dashboard."
	}
	return ""
}

// submission decides with the note of a submitted modal and returns the refusal, if any.
func (h *Interactions) submission(ctx context.Context, in Interaction) string {
	by, refusal := h.decider(ctx, in)
	if refusal != "" {
		return refusal
	}
	if id, ok := strings.CutPrefix(in.ActionID, queue.PlanActorPrefix); ok {
		return h.planSubmission(ctx, in, by, id)
	}
	if !queue.ValidID(in.ActionID) {
		return fmt.Sprintf("Action %q does not exist.", in.ActionID)
	}
	r := queue.DecideRequest{ID: in.ActionID, To: queue.StateChangesRequested, By: by, Note: in.Note, Channel: "slack"}
	if in.CallbackID == ButtonReject {
		r.To = queue.StateRejected
	}
	if _, err := h.cfg.Service.Decide(ctx, r); err != nil {
		return h.refusal(ctx, in, err)
	}
	return ""
}

// refusal words a failed decision for the user.
func (h *Interactions) refusal(ctx context.Context, in Interaction, err error) string {
	return h.flow.Refusal(ctx, err, "slack_user", in.UserID, "action", in.ActionID)
}

func decidedBy(a *queue.Action) string {
	if a.DecidedBy == nil {
		return "by the system"
	}
	return "decided by " + *a.DecidedBy
}

// replyLater sends an ephemeral reply after the answer, so that a slow response_url does not
// hold Slack's request past its 3 seconds.
func (h *Interactions) replyLater(responseURL, text string) {
	h.replies.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.cfg.Client.Ephemeral(ctx, responseURL, text); err != nil {
			h.cfg.Logger.Warn("slack interaction: ephemeral reply", "err", err)
		}
	})
}
