package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/cli"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/telegram"
	"github.com/approvals/approvals/upstream"
)

func migrateCmd(ctx context.Context, args []string, stdout io.Writer) error {
	var c config
	fs := cli.NewFlags("migrate")
	dbFlags(fs, &c)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	st, where, err := app.OpenStore(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(stdout, "migrations applied to %s\n", where)
	return nil
}

func userCmd(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "add" {
		return errors.New("usage: approvals user add --email EMAIL --role ROLE [--slack-id U123] [--telegram-id N] [--update] (password on stdin)")
	}
	var (
		c           config
		email, role string
		slackID     string
		telegramID  string
		update      bool
	)
	fs := cli.NewFlags("user add")
	dbFlags(fs, &c)
	fs.StringVar(&email, "email", "", "email address")
	fs.StringVar(&role, "role", "", "admin, approver, ops or viewer")
	fs.StringVar(&slackID, "slack-id", "", "the user's Slack member id (U0123ABCD), to decide in Slack")
	fs.StringVar(&telegramID, "telegram-id", "", "the user's Telegram user id (123456789), to decide in Telegram")
	fs.BoolVar(&update, "update", false, "update an existing user's password and role")
	if err := cli.ParseFlags(fs, args[1:]); err != nil {
		return err
	}
	email, err := accounts.NormalizeEmail(email)
	if err != nil {
		return fmt.Errorf("--email: %w", err)
	}
	r, err := accounts.ParseRole(role)
	if err != nil {
		return fmt.Errorf("--role: %w", err)
	}
	if err := accounts.ValidateSlackID(slackID); err != nil {
		return fmt.Errorf("--slack-id: %w", err)
	}
	tgID, err := accounts.ParseTelegramID(telegramID)
	if err != nil {
		return fmt.Errorf("--telegram-id: %w", err)
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read password from stdin: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return errors.New("password: write it as one line on stdin")
	}
	hash, err := accounts.HashPassword(password)
	if err != nil {
		return fmt.Errorf("password: %w", err)
	}
	st, _, err := app.OpenStore(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now().UTC()
	// The user and its Slack and Telegram ids are one row written by one
	// statement, so a taken id creates nothing, however many run at once.
	_, err = st.UserCreate(ctx, &accounts.User{Email: email, PasswordHash: hash, Role: r, CreatedAt: now, SlackID: slackID, TelegramID: tgID})
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "created user %s (%s)\n", email, r)
		return recordCLIEvent(ctx, st, queue.StaffEvent{Kind: queue.EventUserAdded, Subject: queue.UserSubject(email),
			Data: userData(r, "", slackID)})
	case errors.Is(err, accounts.ErrSlackIDTaken):
		return fmt.Errorf("--slack-id %s belongs to another user already; user %s was not created", slackID, email)
	case errors.Is(err, accounts.ErrTelegramIDTaken):
		return fmt.Errorf("--telegram-id %d belongs to another user already; user %s was not created", tgID, email)
	case !errors.Is(err, accounts.ErrExists):
		return err
	case !update:
		return fmt.Errorf("user %s exists; pass --update to change the password and role", email)
	}
	u, err := st.UserGetByEmail(ctx, email)
	if err != nil {
		return err
	}
	// One transaction: a taken Slack or Telegram id (the changes another
	// user can refuse) changes nothing.
	err = st.UserUpdate(ctx, accounts.UserUpdateParams{ID: u.ID, PasswordHash: hash, Role: r, SlackID: slackID, TelegramID: tgID, Now: now})
	if errors.Is(err, accounts.ErrSlackIDTaken) {
		return fmt.Errorf("--slack-id %s belongs to another user already; user %s was not changed", slackID, email)
	}
	if errors.Is(err, accounts.ErrTelegramIDTaken) {
		return fmt.Errorf("--telegram-id %d belongs to another user already; user %s was not changed", tgID, email)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "updated user %s (%s); their sessions have ended\n", email, r)
	return recordCLIEvent(ctx, st, queue.StaffEvent{Kind: queue.EventUserUpdated, Subject: queue.UserSubject(email),
		Data: userData(r, u.Role, slackID)})
}

// userData is the data of a user_added or user_updated event: the role
// (and the one before), the Slack id when one was given, and, for an
// update, that the password changed.
func userData(role, previous accounts.Role, slackID string) map[string]any {
	d := map[string]any{"role": role}
	if previous != "" {
		d["previous_role"], d["password_changed"] = previous, true
	}
	if slackID != "" {
		d["slack_id"] = slackID
	}
	return d
}

// recordCLIEvent records a change a command made, by the operating
// system's user (cliActor) on the cli channel. It runs after the change
// committed: if recording fails the change stands, and the command says so
// and fails.
func recordCLIEvent(ctx context.Context, st queue.Store, ev queue.StaffEvent) error {
	ev.Actor, ev.Channel = cliActor(), "cli"
	if err := queue.NewService(st, nil, queue.Options{}).Staff().Record(ctx, ev); err != nil {
		return fmt.Errorf("the change was made, but its audit event was not recorded: %w", err)
	}
	return nil
}

func tokenCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "revoke") {
		return errors.New("usage: approvals token create|revoke --name NAME")
	}
	var (
		c    config
		name string
	)
	fs := cli.NewFlags("token " + args[0])
	dbFlags(fs, &c)
	fs.StringVar(&name, "name", "", "the agent's name")
	if err := cli.ParseFlags(fs, args[1:]); err != nil {
		return err
	}
	if err := accounts.ValidateTokenName(name); err != nil {
		return fmt.Errorf("--name: %w", err)
	}
	st, _, err := app.OpenStore(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now().UTC()
	if args[0] == "revoke" {
		if err := st.TokenRevoke(ctx, accounts.TokenRevokeParams{Name: name, Now: now}); err != nil {
			if errors.Is(err, accounts.ErrNotFound) {
				return fmt.Errorf("no active token is named %q", name)
			}
			return err
		}
		return recordCLIEvent(ctx, st, queue.StaffEvent{Kind: queue.EventTokenRevoked, Subject: queue.TokenSubject(name)})
	}
	token, hash := accounts.NewToken()
	if _, err := st.TokenCreate(ctx, accounts.TokenCreateParams{Name: name, Hash: hash, Now: now}); err != nil {
		if errors.Is(err, accounts.ErrExists) {
			return fmt.Errorf("an active token is already named %q; revoke it first or choose another name", name)
		}
		return err
	}
	fmt.Fprintln(stdout, token)
	return recordCLIEvent(ctx, st, queue.StaffEvent{Kind: queue.EventTokenCreated, Subject: queue.TokenSubject(name)})
}

func toolsCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return errors.New("usage: approvals tools check [FILE]")
	}
	if len(args) > 2 {
		return fmt.Errorf("unexpected argument %q: tools check takes one file", args[2])
	}
	path := env("APPROVALS_TOOLS")
	if len(args) > 1 {
		path = args[1]
	}
	if path == "" {
		return errors.New("name a tools file: approvals tools check FILE (or set APPROVALS_TOOLS)")
	}
	secret, err := secretEnv("APPROVALS_WEBHOOK_SECRET")
	if err != nil {
		return err
	}
	ch, err := readChannelSettings()
	if err != nil {
		return err
	}
	reg, err := app.LoadTools(path, secret, ch)
	if err != nil {
		return err
	}
	if ups := reg.Upstreams(); len(ups) > 0 {
		// Imported tools exist only once their upstream has listed them: connect, as the
		// server would at start, and report an upstream that is down rather than fail.
		m := upstream.Start(ctx, ups, upstream.Options{})
		listings := m.Listings()
		_ = m.Close()
		if reg, err = reg.Import(listings); err != nil {
			return prefixLines(fmt.Sprintf("tools file %s: ", path), err)
		}
		if err := reg.CheckVerifierUpstreams(listings); err != nil {
			return prefixLines(fmt.Sprintf("tools file %s: ", path), err)
		}
		for _, u := range ups {
			l := listings[u.Name]
			state := fmt.Sprintf("connected, %d tools", len(l.Tools))
			if l.Unavailable != "" {
				state = "unavailable: " + l.Unavailable
			}
			fmt.Fprintf(stdout, "upstream %s (%s): %s\n", u.Name, u.Transport(), state)
		}
	}
	fmt.Fprintf(stdout, "%s: %d tools, sha256 %s\n", path, len(reg.Tools()), reg.Hash)
	for _, t := range reg.Tools() {
		reason := t.Reason
		if t.Upstream != "" {
			reason = fmt.Sprintf("[upstream %s tool %s] %s", t.Upstream, t.UpstreamTool, reason)
		}
		if t.Unavailable != "" {
			reason += "; unavailable: " + t.Unavailable
		}
		fmt.Fprintf(stdout, "%-28s %-14s %s\n", t.Name, t.Class, reason)
		if v := t.Verify; v != nil {
			ask := v.Webhook
			if v.Upstream != "" {
				ask = fmt.Sprintf("upstream %s tool %s", v.Upstream, v.Tool)
			}
			fmt.Fprintf(stdout, "    verify %s (resolve: %s)\n", classify.RedactURLsIn(ask), v.Resolve)
		}
		if t.HasPolicy() {
			for _, r := range t.Approval.Policy {
				fmt.Fprintf(stdout, "    rule %s: %s when %s\n", r.Name, r.Decide, r.When)
			}
		}
	}
	return nil
}

// prefixLines puts prefix before each line of a (joined) error, so every line names the file.
func prefixLines(prefix string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return errors.New(strings.Join(lines, "\n"))
}

// telegramCmd registers the webhook with Telegram: setWebhook with
// {APPROVALS_PUBLIC_URL}/integrations/telegram/webhook and the secret that
// every update must carry.
func telegramCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "set-webhook" {
		return errors.New("usage: approvals telegram set-webhook (APPROVALS_TELEGRAM_BOT_TOKEN, APPROVALS_TELEGRAM_SECRET, APPROVALS_PUBLIC_URL)")
	}
	if err := cli.ParseFlags(cli.NewFlags("telegram set-webhook"), args[1:]); err != nil {
		return err
	}
	ch, err := readChannelSettings()
	if err != nil {
		return err
	}
	if !ch.TelegramConfigured() {
		return errors.New("APPROVALS_TELEGRAM_BOT_TOKEN and APPROVALS_TELEGRAM_SECRET must both be set")
	}
	public := strings.TrimRight(env("APPROVALS_PUBLIC_URL"), "/")
	if public == "" {
		return errors.New("APPROVALS_PUBLIC_URL must be set: Telegram posts updates to {APPROVALS_PUBLIC_URL}/integrations/telegram/webhook")
	}
	c, err := telegram.New(telegram.Config{BotToken: ch.TelegramBotToken, APIURL: ch.TelegramAPIURL, PublicURL: public})
	if err != nil {
		return err
	}
	hook := public + "/integrations/telegram/webhook"
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.SetWebhook(ctx, hook, ch.TelegramSecret); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Telegram sends the bot's updates to %s\n", hook)
	return nil
}
