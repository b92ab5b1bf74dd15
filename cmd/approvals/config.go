package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/queue/postgres"
	"github.com/approvals/approvals/queue/sqlite"
)

// config is everything the server reads from flags and environment.
type config struct {
	Addr          string
	DatabaseURL   string
	Tools         string
	WebhookSecret string
	SessionSecret string
	SweepInterval time.Duration
	MaxBody       int64
}

// env reads NAME, or the file named by NAME_FILE (for secrets).
func env(name string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	if f := os.Getenv(name + "_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
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
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.WebhookSecret = env("APPROVALS_WEBHOOK_SECRET")
	c.SessionSecret = env("APPROVALS_SESSION_SECRET")
	c.SweepInterval = 30 * time.Second
	if v := env("APPROVALS_SWEEP_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("APPROVALS_SWEEP_INTERVAL %q is not a positive Go duration such as 30s", v)
		}
		c.SweepInterval = d
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

// store is both halves of storage.
type store interface {
	queue.Store
	accounts.Store
}

// openStore picks the store from the URL and says which it is and where.
func openStore(ctx context.Context, url string) (store, string, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			return nil, "", err
		}
		return s, "PostgreSQL " + redact(url), nil
	case url == "", strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		if path == "" {
			path = "approvals.db"
		}
		s, err := sqlite.Open(ctx, path)
		if err != nil {
			return nil, "", fmt.Errorf("open SQLite database %s: %w", path, err)
		}
		return s, "SQLite " + path, nil
	}
	return nil, "", fmt.Errorf("DATABASE_URL %q: use postgres://…, postgresql://… or sqlite:PATH", redact(url))
}

// redact hides a password in a URL for logs and errors.
func redact(url string) string {
	at := strings.LastIndexByte(url, '@')
	scheme := strings.Index(url, "://")
	if at < 0 || scheme < 0 {
		return url
	}
	userinfo := url[scheme+3 : at]
	if user, _, ok := strings.Cut(userinfo, ":"); ok {
		return url[:scheme+3] + user + ":xxxxx" + url[at:]
	}
	return url
}

func loadTools(path, secret string) (*classify.Registry, error) {
	if path == "" {
		return classify.Empty(), nil
	}
	return classify.Load(path, classify.Options{WebhookSecretSet: secret != ""})
}
