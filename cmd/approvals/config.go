package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/cli"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/sso"
	"github.com/approvals/approvals/telegram"
	"github.com/approvals/approvals/web"
	"github.com/approvals/approvals/webhooksign"
)

// config is everything the server reads from flags and environment: the
// address to listen on, and the settings app.Run runs the process with.
type config struct {
	Addr string
	app.Config
}

// readSSOSettings reads single sign-on's settings; the client secret may
// come from APPROVALS_OIDC_CLIENT_SECRET_FILE. Without an issuer there is
// no single sign-on, and the other OIDC settings are refused rather than
// silently ignored.
func readSSOSettings(c *config) error {
	switch v := strings.ToLower(strings.TrimSpace(env("APPROVALS_PASSWORD_LOGIN"))); v {
	case "", "on":
	case "off":
		c.PasswordLoginOff = true
	default:
		return fmt.Errorf("APPROVALS_PASSWORD_LOGIN %q must be on or off", env("APPROVALS_PASSWORD_LOGIN"))
	}
	c.SSORecheck = sso.DefaultRecheck
	if v := env("APPROVALS_OIDC_RECHECK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			return fmt.Errorf("APPROVALS_OIDC_RECHECK %q is not a Go duration of at least 1m, such as 1h", v)
		}
		c.SSORecheck = d
	}
	secret, err := secretEnv("APPROVALS_OIDC_CLIENT_SECRET")
	if err != nil {
		return err
	}
	issuer := strings.TrimSpace(env("APPROVALS_OIDC_ISSUER"))
	if issuer == "" {
		for _, name := range []string{"APPROVALS_OIDC_CLIENT_ID", "APPROVALS_OIDC_ROLES", "APPROVALS_OIDC_GROUPS_CLAIM", "APPROVALS_OIDC_SCOPES", "APPROVALS_OIDC_RECHECK"} {
			if env(name) != "" {
				return fmt.Errorf("%s is set but APPROVALS_OIDC_ISSUER is not: set the issuer to turn single sign-on on", name)
			}
		}
		if secret != "" {
			return errors.New("APPROVALS_OIDC_CLIENT_SECRET is set but APPROVALS_OIDC_ISSUER is not: set the issuer to turn single sign-on on")
		}
		if c.PasswordLoginOff {
			return errors.New("APPROVALS_PASSWORD_LOGIN=off needs single sign-on (APPROVALS_OIDC_ISSUER): otherwise nobody could sign in")
		}
		return nil
	}
	s := &sso.Config{Issuer: issuer, ClientID: strings.TrimSpace(env("APPROVALS_OIDC_CLIENT_ID")), ClientSecret: secret,
		GroupsClaim: strings.TrimSpace(env("APPROVALS_OIDC_GROUPS_CLAIM"))}
	roles := env("APPROVALS_OIDC_ROLES")
	if strings.TrimSpace(roles) == "" {
		return errors.New("APPROVALS_OIDC_ROLES is required with APPROVALS_OIDC_ISSUER (such as approvals-admins=admin,support=approver): without it the provider's groups give nobody a role")
	}
	if s.Roles, err = sso.ParseRoles(roles); err != nil {
		return fmt.Errorf("APPROVALS_OIDC_ROLES: %w", err)
	}
	if v := env("APPROVALS_OIDC_SCOPES"); v != "" {
		s.Scopes = strings.Fields(strings.ReplaceAll(v, ",", " "))
		if !slices.Contains(s.Scopes, "openid") {
			return fmt.Errorf("APPROVALS_OIDC_SCOPES %q must include openid", v)
		}
	}
	// The rest (the issuer's shape, the client id) is sso.New's to judge,
	// at start, with the redirect URI the public URL gives.
	probe := *s
	probe.RedirectURL = c.PublicURL + "/auth/oidc/callback"
	if _, err := sso.New(probe); err != nil {
		return err
	}
	c.SSO = s
	return nil
}

// readChannelSettings reads the channel settings; the secrets (and the SMTP
// URL, which holds a password) may come from NAME_FILE.
func readChannelSettings() (app.ChannelSettings, error) {
	var c app.ChannelSettings
	for _, s := range []struct {
		name string
		to   *string
	}{
		{"APPROVALS_SLACK_BOT_TOKEN", &c.SlackBotToken},
		{"APPROVALS_SLACK_SIGNING_SECRET", &c.SlackSigningSecret},
		{"APPROVALS_SMTP_URL", &c.SMTPURL},
		{"APPROVALS_TELEGRAM_BOT_TOKEN", &c.TelegramBotToken},
		{"APPROVALS_TELEGRAM_SECRET", &c.TelegramSecret},
	} {
		v, err := secretEnv(s.name)
		if err != nil {
			return c, err
		}
		*s.to = v
	}
	c.SlackAPIURL = env("APPROVALS_SLACK_API_URL")
	c.SlackTeamID, c.SlackAppID = env("APPROVALS_SLACK_TEAM_ID"), env("APPROVALS_SLACK_APP_ID")
	c.SMTPFrom = env("APPROVALS_SMTP_FROM")
	c.TelegramAPIURL, c.PagerDutyURL = env("APPROVALS_TELEGRAM_API_URL"), env("APPROVALS_PAGERDUTY_URL")
	if c.TelegramSecret != "" {
		if err := telegram.ValidateSecret(c.TelegramSecret); err != nil {
			return c, err
		}
	}
	for name, v := range map[string]string{"APPROVALS_TELEGRAM_API_URL": c.TelegramAPIURL, "APPROVALS_PAGERDUTY_URL": c.PagerDutyURL} {
		if u, err := url.Parse(v); v != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			return c, fmt.Errorf("%s %q is not an absolute http or https URL", name, v)
		}
	}
	return c, nil
}

// env reads a setting from the environment.
func env(name string) string { return os.Getenv(name) }

// secretEnv reads a secret from NAME, or from the file named by NAME_FILE;
// an unreadable file is an error naming it, never a silently empty secret.
func secretEnv(name string) (string, error) {
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	f := os.Getenv(name + "_FILE")
	if f == "" {
		return "", nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// dbFlags registers the storage flag shared by every command.
func dbFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.DatabaseURL, "database-url", env("DATABASE_URL"), "postgres://… or sqlite:PATH (default sqlite:approvals.db)")
}

func parseServeConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := env("APPROVALS_ADDR")
	if addr == "" {
		addr = "localhost:8080"
	}
	fs.StringVar(&c.Addr, "addr", addr, "listen address")
	dbFlags(fs, &c)
	fs.StringVar(&c.Tools, "tools", env("APPROVALS_TOOLS"), "tools file (YAML)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return c, err
	}
	if c.PprofAddr = env("APPROVALS_PPROF_ADDR"); c.PprofAddr != "" && !loopback(c.PprofAddr) {
		return c, fmt.Errorf("APPROVALS_PPROF_ADDR %q: profiles are served on a loopback address only, such as 127.0.0.1:6060", c.PprofAddr)
	}
	var err error
	if c.WebhookSecret, err = secretEnv("APPROVALS_WEBHOOK_SECRET"); err != nil {
		return c, err
	}
	// A "whsec_" secret that is not base64 would otherwise surface only at
	// the first delivery; refuse it before the server starts.
	if c.WebhookSecret != "" {
		if _, err := webhooksign.New(c.WebhookSecret); err != nil {
			return c, fmt.Errorf("APPROVALS_WEBHOOK_SECRET: %w", err)
		}
	}
	if c.SessionSecret, err = secretEnv("APPROVALS_SESSION_SECRET"); err != nil {
		return c, err
	}
	if c.Channels, err = readChannelSettings(); err != nil {
		return c, err
	}
	if c.PublicURL = strings.TrimRight(env("APPROVALS_PUBLIC_URL"), "/"); c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("APPROVALS_PUBLIC_URL %q is not an absolute http or https URL such as https://approvals.example.com", c.PublicURL)
		}
	} else {
		c.PublicURL = "http://" + linkHost(c.Addr)
	}
	if err := readSSOSettings(&c); err != nil {
		return c, err
	}
	c.SweepInterval = 30 * time.Second
	if v := env("APPROVALS_SWEEP_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("APPROVALS_SWEEP_INTERVAL %q is not a positive Go duration such as 30s", v)
		}
		c.SweepInterval = d
	}
	if c.TrustedProxies, err = web.ParseTrustedProxies(env("APPROVALS_TRUSTED_PROXIES")); err != nil {
		return c, fmt.Errorf("APPROVALS_TRUSTED_PROXIES: %w", err)
	}
	c.MetricsAddr = env("APPROVALS_METRICS_ADDR")
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return c, fmt.Errorf("APPROVALS_METRICS_ADDR %q is not a listen address such as 127.0.0.1:9090", c.MetricsAddr)
		}
	}
	if c.Waiters, err = parseMaxWaiters(env("APPROVALS_MAX_WAITERS")); err != nil {
		return c, err
	}
	if c.MaxStreams, err = positiveInt("APPROVALS_MAX_STREAMS", longpoll.DefaultMaxStreams, "live event streams of the dashboard"); err != nil {
		return c, err
	}
	if c.MaxUpstreamCalls, err = positiveInt("APPROVALS_MAX_UPSTREAM_CALLS", queue.DefaultMaxUpstreamCalls, "upstream calls submissions make at once"); err != nil {
		return c, err
	}
	c.OutboxLease = time.Minute
	if v := env("APPROVALS_OUTBOX_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 2*time.Second {
			return c, fmt.Errorf("APPROVALS_OUTBOX_LEASE %q is not a Go duration of at least 2s, such as 1m", v)
		}
		c.OutboxLease = d
	}
	c.AuditLease = maintenance.DefaultSealLease
	if v := env("APPROVALS_AUDIT_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return c, fmt.Errorf("APPROVALS_AUDIT_LEASE %q is not a Go duration of at least 1s, such as 10s", v)
		}
		c.AuditLease = d
	}
	c.MaxBody = 256 << 10
	if v := env("APPROVALS_MAX_BODY"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1024 {
			return c, fmt.Errorf("APPROVALS_MAX_BODY %q must be a number of bytes, at least 1024", v)
		}
		c.MaxBody = n
	}
	return c, nil
}

// positiveInt reads a setting that counts what (a number from 1), def when unset.
func positiveInt(name string, def int, what string) (int, error) {
	v := env(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s %q must be a positive number of %s (default %d)", name, v, what, def)
	}
	return n, nil
}

// parseMaxWaiters reads APPROVALS_MAX_WAITERS: "TOTAL" or "TOTAL,PER_TOKEN"
// (default 1000,100).
func parseMaxWaiters(v string) (longpoll.WaiterLimits, error) {
	var l longpoll.WaiterLimits
	if v == "" {
		return l.WithDefaults(), nil
	}
	total, per, hasPer := strings.Cut(v, ",")
	bad := fmt.Errorf("APPROVALS_MAX_WAITERS %q must be a positive number of waiting requests in all, optionally followed by ,N per agent token (such as 1000,100)", v)
	n, err := strconv.Atoi(strings.TrimSpace(total))
	if err != nil || n < 1 {
		return l, bad
	}
	l.Total = n
	if hasPer {
		if l.PerHolder, err = strconv.Atoi(strings.TrimSpace(per)); err != nil || l.PerHolder < 1 || l.PerHolder > n {
			return l, bad
		}
	}
	return l.WithDefaults(), nil
}

// linkHost is the listen address as a link can name it: an address that
// listens on every interface (":8080", "0.0.0.0:8080", "[::]:8080") is
// reached as localhost.
func linkHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
