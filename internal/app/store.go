package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/sqlite"
	"github.com/approvals/approvals/storage"
)

// OpenStore picks the store from the URL and says which it is and where.
func OpenStore(ctx context.Context, url string) (storage.Store, string, error) {
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
