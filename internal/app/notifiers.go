package app

import (
	"log/slog"

	gomail "github.com/wneessen/go-mail"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/notifier/email"
	"github.com/approvals/approvals/notifier/webhook"
	"github.com/approvals/approvals/pagerduty"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/slack"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/teams"
	"github.com/approvals/approvals/telegram"
)

// ChannelSettings are what the notification channels need. The tools file
// is judged against them (a Slack channel without the bot token fails
// tools check and startup) and the notifiers are built from them.
type ChannelSettings struct {
	SlackBotToken      string // APPROVALS_SLACK_BOT_TOKEN
	SlackSigningSecret string // APPROVALS_SLACK_SIGNING_SECRET
	SlackAPIURL        string // APPROVALS_SLACK_API_URL; Slack's when empty
	// SlackTeamID and SlackAppID (APPROVALS_SLACK_TEAM_ID, APPROVALS_SLACK_APP_ID), when
	// set, are the only workspace and app whose interactions are acted on.
	SlackTeamID, SlackAppID string
	SMTPURL                 string // APPROVALS_SMTP_URL (it may carry a password)
	SMTPFrom                string // APPROVALS_SMTP_FROM
	TelegramBotToken        string // APPROVALS_TELEGRAM_BOT_TOKEN
	TelegramSecret          string // APPROVALS_TELEGRAM_SECRET, the webhook's secret header
	TelegramAPIURL          string // APPROVALS_TELEGRAM_API_URL; Telegram's when empty
	PagerDutyURL            string // APPROVALS_PAGERDUTY_URL; PagerDuty's when empty
}

// TelegramConfigured says whether Telegram's bot token and webhook secret are set.
func (c ChannelSettings) TelegramConfigured() bool {
	return c.TelegramBotToken != "" && c.TelegramSecret != ""
}

// SlackConfigured says whether Slack's bot token and signing secret are set.
func (c ChannelSettings) SlackConfigured() bool {
	return c.SlackBotToken != "" && c.SlackSigningSecret != ""
}

// SMTPConfigured says whether the SMTP server and sender are set.
func (c ChannelSettings) SMTPConfigured() bool { return c.SMTPURL != "" && c.SMTPFrom != "" }

// LoadTools reads the tools file, judging its channels against the
// settings; tools check and Run both call it, so they agree.
func LoadTools(path, secret string, ch ChannelSettings) (*classify.Registry, error) {
	if path == "" {
		return classify.Empty(), nil
	}
	return classify.Load(path, classify.Options{
		WebhookSecretSet:   secret != "",
		WebhookSecret:      secret,
		SlackConfigured:    ch.SlackConfigured(),
		SMTPConfigured:     ch.SMTPConfigured(),
		TelegramConfigured: ch.TelegramConfigured(),
	})
}

// newNotifiers builds a notifier for every channel kind whose settings are
// present. The tools file was already judged against the same settings
// (LoadTools), so a channel in use never lacks its notifier.
func newNotifiers(cfg Config, svc *queue.Service, st storage.Store, log *slog.Logger) (Notifiers, error) {
	n := Notifiers{ByKind: map[string]queue.Notifier{}}
	// Every webhook channel signs with its own secret, which the tools file holds.
	w, err := webhook.New(webhook.Config{})
	if err != nil {
		return n, err
	}
	n.ByKind[classify.KindWebhook] = maintenance.ChannelNotifier[[]byte](classify.KindWebhook, w, st, nil)
	ch := cfg.Channels
	if ch.SMTPConfigured() {
		server, err := email.ParseURL(ch.SMTPURL)
		if err != nil {
			return n, err
		}
		e, err := email.New(email.Config{Server: server, From: ch.SMTPFrom, PublicURL: cfg.PublicURL})
		if err != nil {
			return n, err
		}
		n.ByKind[classify.KindEmail] = maintenance.ChannelNotifier[*gomail.Msg](classify.KindEmail, e, st, nil)
	}
	if ch.SlackConfigured() {
		c, err := slack.New(slack.Config{BotToken: ch.SlackBotToken, APIURL: ch.SlackAPIURL, PublicURL: cfg.PublicURL, Tools: svc.Registry})
		if err != nil {
			return n, err
		}
		n.ByKind[classify.KindSlack] = maintenance.ChannelNotifier[slack.Message](classify.KindSlack, c, st, nil)
		if n.Interactions, err = slack.NewInteractions(slack.InteractionsConfig{
			SigningSecret: ch.SlackSigningSecret, TeamID: ch.SlackTeamID, AppID: ch.SlackAppID,
			Client: c, Service: svc, Actions: st, Staff: st, Logger: log,
		}); err != nil {
			return n, err
		}
	}
	if ch.TelegramConfigured() {
		c, err := telegram.New(telegram.Config{BotToken: ch.TelegramBotToken, APIURL: ch.TelegramAPIURL, PublicURL: cfg.PublicURL})
		if err != nil {
			return n, err
		}
		n.ByKind[classify.KindTelegram] = maintenance.ChannelNotifier[telegram.Message](classify.KindTelegram, c, st, nil)
		if n.Telegram, err = telegram.NewWebhook(telegram.WebhookConfig{Secret: ch.TelegramSecret, Client: c,
			Service: svc, Actions: st, Prompts: st, Staff: st, Logger: log}); err != nil {
			return n, err
		}
	}
	// Teams and PagerDuty need nothing but what the tools file holds (the
	// webhook URL, the routing key).
	tm, err := teams.New(teams.Config{PublicURL: cfg.PublicURL})
	if err != nil {
		return n, err
	}
	n.ByKind[classify.KindTeams] = maintenance.ChannelNotifier[teams.Message](classify.KindTeams, tm, st, nil)
	pd, err := pagerduty.New(pagerduty.Config{URL: ch.PagerDutyURL, PublicURL: cfg.PublicURL})
	if err != nil {
		return n, err
	}
	n.ByKind[classify.KindPagerDuty] = maintenance.ChannelNotifier[pagerduty.Event](classify.KindPagerDuty, pd, st, nil)
	return n, nil
}
