package main

import (
	"log/slog"

	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/notifier/email"
	"github.com/approvals/approvals/notifier/webhook"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/slack"
	"github.com/approvals/approvals/storage"
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
	n.ByKind["webhook"] = w
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
		n.ByKind["email"] = e
	}
	if ch.slackConfigured() {
		c, err := slack.New(slack.Config{BotToken: ch.SlackBotToken, APIURL: ch.SlackAPIURL, PublicURL: cfg.PublicURL, Messages: st, Actions: st,
			Tools: svc.Registry})
		if err != nil {
			return n, err
		}
		n.ByKind["slack"] = c
		if n.Interactions, err = slack.NewInteractions(slack.InteractionsConfig{
			SigningSecret: ch.SlackSigningSecret, TeamID: ch.SlackTeamID, AppID: ch.SlackAppID,
			Client: c, Service: svc, Actions: st, Staff: st, Logger: log,
		}); err != nil {
			return n, err
		}
	}
	return n, nil
}
