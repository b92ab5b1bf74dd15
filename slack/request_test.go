package slack_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/approvals/approvals/slack"
	"github.com/approvals/approvals/slack/slacktest"
)

const signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"

func TestVerifyRequest(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	body := []byte("payload=" + url.QueryEscape(`{"type":"block_actions"}`))
	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
		ok     bool
	}{
		{"good", slacktest.Sign(signingSecret, now, body), body, true},
		{"good, 4 minutes old", slacktest.Sign(signingSecret, now.Add(-4*time.Minute), body), body, true},
		{"stale, 6 minutes old", slacktest.Sign(signingSecret, now.Add(-6*time.Minute), body), body, false},
		{"from the future", slacktest.Sign(signingSecret, now.Add(6*time.Minute), body), body, false},
		{"other secret", slacktest.Sign("another-secret", now, body), body, false},
		{"body changed", slacktest.Sign(signingSecret, now, body), append(bytes.Clone(body), 'x'), false},
		{"no headers", http.Header{}, body, false},
		{"not v0", func() http.Header {
			h := slacktest.Sign(signingSecret, now, body)
			h.Set("X-Slack-Signature", "v1="+h.Get("X-Slack-Signature")[3:])
			return h
		}(), body, false},
		{"timestamp changed", func() http.Header {
			h := slacktest.Sign(signingSecret, now, body)
			h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(now.Unix()+1, 10))
			return h
		}(), body, false},
	} {
		err := slack.VerifyRequest(signingSecret, tc.header, tc.body, now)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, slack.ErrUnverified) {
			t.Errorf("%s: error %v, want ErrUnverified", tc.name, err)
		}
	}
	if err := slack.VerifyRequest("", slacktest.Sign("", now, body), body, now); !errors.Is(err, slack.ErrUnverified) {
		t.Errorf("no secret configured: %v, want ErrUnverified", err)
	}
}

// Our verifier and slack-go's agree on requests signed now (slack-go reads the wall clock).
func TestVerifyRequestAgreesWithSlackGo(t *testing.T) {
	t.Parallel()
	body := []byte("payload=%7B%7D")
	for _, secret := range []string{signingSecret, "other"} {
		h := slacktest.Sign(secret, time.Now(), body)
		ours := slack.VerifyRequest(signingSecret, h, body, time.Now())
		sv, err := slackapi.NewSecretsVerifier(h, signingSecret)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if (ours == nil) != (err == nil) {
			t.Fatalf("secret %q: ours %v, slack-go %v", secret, ours, err)
		}
	}
}

func form(payload string) []byte { return []byte("payload=" + url.QueryEscape(payload)) }

// Payloads as Slack sends them (trimmed of fields we do not read).
const blockActionsPayload = `{
  "type": "block_actions",
  "user": {"id": "U123ANN", "username": "ann", "team_id": "T9"},
  "team": {"id": "T9", "domain": "example"},
  "api_app_id": "A1",
  "trigger_id": "1234.5678.abcd",
  "response_url": "https://hooks.slack.com/actions/T9/1/xyz",
  "container": {"type": "message", "message_ts": "1700000000.000111", "channel_id": "C0APPROVALS"},
  "channel": {"id": "C0APPROVALS", "name": "approvals"},
  "message": {"type": "message", "ts": "1700000000.000111", "text": "Approval needed"},
  "actions": [{"type": "button", "block_id": "decision", "action_id": "reject", "value": "0190a-7",
               "text": {"type": "plain_text", "text": "Reject"}, "action_ts": "1700000001.1"}]
}`

const viewSubmissionPayload = `{
  "type": "view_submission",
  "user": {"id": "U123ANN", "username": "ann", "team_id": "T9"},
  "team": {"id": "T9", "domain": "example"},
  "trigger_id": "9999.1.x",
  "view": {
    "id": "V123", "type": "modal", "callback_id": "request_changes", "private_metadata": "0190a-7",
    "blocks": [{"type": "input", "block_id": "note", "label": {"type": "plain_text", "text": "What should change?"},
                "element": {"type": "plain_text_input", "action_id": "note", "multiline": true}}],
    "state": {"values": {"note": {"note": {"type": "plain_text_input", "value": "  Use the customer's first name.\n"}}}}
  }
}`

func TestParseInteraction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body []byte
		want slack.Interaction
		err  error
	}{
		{name: "button", body: form(blockActionsPayload), want: slack.Interaction{
			Kind: "block_actions", UserID: "U123ANN", TeamID: "T9", AppID: "A1", ActionID: "0190a-7", Button: "reject",
			TriggerID: "1234.5678.abcd", ResponseURL: "https://hooks.slack.com/actions/T9/1/xyz",
		}},
		{name: "modal submitted", body: form(viewSubmissionPayload), want: slack.Interaction{
			Kind: "view_submission", UserID: "U123ANN", TeamID: "T9", ActionID: "0190a-7", TriggerID: "9999.1.x",
			CallbackID: "request_changes", PrivateMetadata: "0190a-7", Note: "Use the customer's first name.",
		}},
		{name: "modal closed", body: form(`{"type":"view_closed","user":{"id":"U1"},"view":{"callback_id":"reject"}}`), err: slack.ErrUnsupportedInteraction},
		{name: "other button", body: form(`{"type":"block_actions","user":{"id":"U1"},"actions":[{"type":"button","block_id":"decision","action_id":"open_link","value":"x"}]}`), err: slack.ErrUnsupportedInteraction},
		{name: "other modal", body: form(`{"type":"view_submission","user":{"id":"U1"},"view":{"callback_id":"settings","private_metadata":"x"}}`), err: slack.ErrUnsupportedInteraction},
		{name: "no actions", body: form(`{"type":"block_actions","user":{"id":"U1"},"actions":[]}`), err: slack.ErrBadInteraction},
		{name: "no user", body: form(`{"type":"block_actions","actions":[{"type":"button","block_id":"decision","action_id":"approve","value":"a1"}]}`), err: slack.ErrBadInteraction},
		{name: "no action id", body: form(`{"type":"block_actions","user":{"id":"U1"},"actions":[{"type":"button","block_id":"decision","action_id":"approve","value":""}]}`), err: slack.ErrBadInteraction},
		{name: "payload not JSON", body: form(`{"type":`), err: slack.ErrBadInteraction},
		{name: "no payload", body: []byte("foo=bar"), err: slack.ErrBadInteraction},
		{name: "not a form", body: []byte("payload=%zz"), err: slack.ErrBadInteraction},
	} {
		got, err := slack.ParseInteraction(tc.body)
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
		case tc.err == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == nil && got != tc.want:
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestModalError(t *testing.T) {
	t.Parallel()
	var got struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(slack.ModalError("not pending any more"), &got); err != nil {
		t.Fatal(err)
	}
	if got.ResponseAction != "errors" || got.Errors["note"] != "not pending any more" {
		t.Fatalf("ModalError = %+v", got)
	}
}
