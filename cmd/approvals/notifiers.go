package main

import (
	"log/slog"

	gomail "github.com/wneessen/go-mail"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
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

// newNotifiers builds a notifier for every channel kind whose settings are
// present. The tools file was already judged against the same settings
// (loadTools), so a channel in use never lacks its notifier.
func newNotifiers(cfg config, svc *queue.Service, st storage.Store, log *slog.Logger) (app.Notifiers, error) {
	n := app.Notifiers{ByKind: map[string]queue.Notifier{}}
	// Every webhook channel signs with its own secret, which the tools file holds.
	w, err := webhook.New(webhook.Config{})
	if err != nil {
		return n, err
	}
	n.ByKind[classify.KindWebhook] = maintenance.ChannelNotifier[[]byte](classify.KindWebhook, w, st, nil)
	ch := cfg.Channels
	if ch.smtpConfigured() {
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
	if ch.slackConfigured() {
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
	if ch.telegramConfigured() {
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
