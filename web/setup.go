package web

import (
	"context"
	"net/url"
	"strings"

	"github.com/approvals/approvals/handlers"
)

// SetupURL returns the one-time link that creates the first admin, under
// base (e.g. "http://localhost:8080"), or "" when staff users exist. The
// token lives in the settings table, so every process logs the same link;
// it stops working once a user exists.
func (s *Server) SetupURL(ctx context.Context, base string) (string, error) {
	token, err := handlers.SetupToken(ctx, s.cfg.Accounts)
	if err != nil || token == "" {
		return "", err
	}
	return strings.TrimRight(base, "/") + "/setup?token=" + url.QueryEscape(token), nil
}
