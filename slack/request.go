package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"
)

// Errors of the interactions endpoint.
var (
	// ErrUnverified: the request is not signed by Slack under our signing secret, or its
	// timestamp is more than five minutes off. Answer 401 and change nothing.
	ErrUnverified = errors.New("slack request not verified")
	// ErrBadInteraction: a verified request whose payload is not what Slack sends. Answer 400.
	ErrBadInteraction = errors.New("malformed Slack interaction")
	// ErrUnsupportedInteraction: a well-formed interaction that is not one of ours (a modal
	// closed, a shortcut). Answer 200 and do nothing.
	ErrUnsupportedInteraction = errors.New("unsupported Slack interaction")
)

// MaxClockSkew is how far a request's timestamp may be from now, as Slack recommends.
const MaxClockSkew = 5 * time.Minute

// VerifyRequest checks Slack's request signature: X-Slack-Signature must be "v0=" + hex
// HMAC-SHA256 of "v0:{X-Slack-Request-Timestamp}:{body}" under signingSecret, and the
// timestamp within MaxClockSkew of now. Every failure wraps ErrUnverified.
//
// slack-go's SecretsVerifier computes the same signature but reads the wall clock itself;
// this takes the clock as an argument so that the window is tested without waiting.
func VerifyRequest(signingSecret string, h http.Header, body []byte, now time.Time) error {
	if signingSecret == "" {
		return fmt.Errorf("%w: no signing secret configured", ErrUnverified)
	}
	rawTS := h.Get("X-Slack-Request-Timestamp")
	sig := h.Get("X-Slack-Signature")
	if rawTS == "" || sig == "" {
		return fmt.Errorf("%w: X-Slack-Request-Timestamp or X-Slack-Signature missing", ErrUnverified)
	}
	ts, err := strconv.ParseInt(rawTS, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: X-Slack-Request-Timestamp is not a Unix time", ErrUnverified)
	}
	if skew := now.Sub(time.Unix(ts, 0)).Abs(); skew > MaxClockSkew {
		return fmt.Errorf("%w: timestamp is %s off (a replay or a wrong clock)", ErrUnverified, skew.Round(time.Second))
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return fmt.Errorf("%w: X-Slack-Signature is not v0=…", ErrUnverified)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return fmt.Errorf("%w: X-Slack-Signature is not hex", ErrUnverified)
	}
	mac := hmac.New(sha256.New, []byte(signingSecret))
	mac.Write([]byte("v0:" + rawTS + ":"))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: signature does not match", ErrUnverified)
	}
	return nil
}

// Interaction kinds.
const (
	KindBlockActions   = "block_actions"   // a button was pressed
	KindViewSubmission = "view_submission" // the note modal was submitted
)

// Interaction is what the interactions endpoint needs of Slack's payload.
type Interaction struct {
	Kind   string // KindBlockActions or KindViewSubmission
	UserID string // the Slack user (U…), mapped to a staff user by their Slack id
	TeamID string // the workspace (T…)
	AppID  string // the app whose message it was (A…), api_app_id
	// ActionID is the approvals action decided: the button's value, or the modal's
	// private_metadata.
	ActionID string
	// Button is the pressed button's action_id (ButtonApprove, ButtonReject,
	// ButtonRequestChanges); block_actions only.
	Button      string
	TriggerID   string // opens the note modal; valid for 3 seconds
	ResponseURL string // for an ephemeral reply; block_actions only
	// CallbackID ("reject" or "request_changes"), PrivateMetadata and Note come from a
	// submitted note modal.
	CallbackID      string
	PrivateMetadata string
	Note            string
}

// ParseInteraction reads the form-encoded body of an interaction request (its "payload"
// field). It answers ErrBadInteraction for a payload that is not Slack's and
// ErrUnsupportedInteraction for an interaction other than our buttons and note modal.
func ParseInteraction(body []byte) (Interaction, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return Interaction{}, fmt.Errorf("%w: body is not form-encoded", ErrBadInteraction)
	}
	payload := form.Get("payload")
	if payload == "" {
		return Interaction{}, fmt.Errorf("%w: no payload field", ErrBadInteraction)
	}
	var ic slackapi.InteractionCallback
	if err := json.Unmarshal([]byte(payload), &ic); err != nil {
		return Interaction{}, fmt.Errorf("%w: payload is not JSON: %v", ErrBadInteraction, err)
	}
	in := Interaction{
		Kind: string(ic.Type), UserID: ic.User.ID, TeamID: ic.Team.ID, AppID: ic.APIAppID,
		TriggerID: ic.TriggerID, ResponseURL: ic.ResponseURL,
	}
	switch ic.Type {
	case slackapi.InteractionTypeBlockActions:
		if len(ic.ActionCallback.BlockActions) == 0 {
			return Interaction{}, fmt.Errorf("%w: block_actions without actions", ErrBadInteraction)
		}
		a := ic.ActionCallback.BlockActions[0]
		switch a.ActionID {
		case ButtonApprove, ButtonApproveSimilar, ButtonReject, ButtonRequestChanges:
		default:
			return Interaction{}, fmt.Errorf("%w: button %q", ErrUnsupportedInteraction, a.ActionID)
		}
		in.Button, in.ActionID = a.ActionID, a.Value
	case slackapi.InteractionTypeViewSubmission:
		switch ic.View.CallbackID {
		case ButtonReject, ButtonRequestChanges:
		default:
			return Interaction{}, fmt.Errorf("%w: view %q", ErrUnsupportedInteraction, ic.View.CallbackID)
		}
		in.CallbackID, in.PrivateMetadata, in.ActionID = ic.View.CallbackID, ic.View.PrivateMetadata, ic.View.PrivateMetadata
		if ic.View.State != nil {
			in.Note = strings.TrimSpace(ic.View.State.Values[noteID][noteID].Value)
		}
	default:
		return Interaction{}, fmt.Errorf("%w: type %q", ErrUnsupportedInteraction, ic.Type)
	}
	switch {
	case in.UserID == "":
		return Interaction{}, fmt.Errorf("%w: no user id", ErrBadInteraction)
	case in.ActionID == "":
		return Interaction{}, fmt.Errorf("%w: no action id", ErrBadInteraction)
	}
	return in, nil
}

// noteID is both the block_id and the action_id of the modal's text input.
const noteID = "note"

// OpenNoteModal opens the modal that asks for the note of a rejection or a change request
// (kind ButtonReject or ButtonRequestChanges). Its submission comes back as a
// view_submission with CallbackID kind and PrivateMetadata actionID.
func (c *Client) OpenNoteModal(ctx context.Context, triggerID, kind, actionID string) error {
	var title, submit, label string
	switch kind {
	case ButtonReject:
		title, submit, label = "Reject", "Reject", "Why is it rejected? The agent sees this note."
	case ButtonRequestChanges:
		title, submit, label = "Request changes", "Request changes", "What should the agent change?"
	default:
		return fmt.Errorf("note modal: kind %q is neither %q nor %q", kind, ButtonReject, ButtonRequestChanges)
	}
	input := slackapi.NewPlainTextInputBlockElement(nil, noteID)
	input.Multiline = true
	_, err := c.api.OpenViewContext(ctx, triggerID, slackapi.ModalViewRequest{
		Type:            slackapi.VTModal,
		Title:           plain(title),
		Submit:          plain(submit),
		Close:           plain("Cancel"),
		CallbackID:      kind,
		PrivateMetadata: actionID,
		Blocks:          slackapi.Blocks{BlockSet: []slackapi.Block{slackapi.NewInputBlock(noteID, plain(label), nil, input)}},
	})
	return apiError("views.open", err)
}

// Ephemeral answers an interaction through its response_url with a message only the user
// who acted sees (why nothing changed, say).
func (c *Client) Ephemeral(ctx context.Context, responseURL, text string) error {
	if responseURL == "" {
		return errors.New("slack ephemeral reply: no response_url")
	}
	err := slackapi.PostWebhookCustomHTTPContext(ctx, responseURL, c.http, &slackapi.WebhookMessage{
		Text: text, ResponseType: slackapi.ResponseTypeEphemeral,
	})
	if err != nil {
		return fmt.Errorf("slack ephemeral reply: %w", err)
	}
	return nil
}

// ModalError is the body that answers a view_submission to keep the modal open with text
// shown under the note field (a user who may not decide, an action no longer pending): a
// modal submission has no response_url for an ephemeral reply.
func ModalError(text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"response_action": "errors",
		"errors":          map[string]string{noteID: text},
	})
	return b
}
