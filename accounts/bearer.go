package accounts

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/approvals/approvals/queue"
)

// AuthenticateAgent returns the name of the agent whose token the request
// carries as Authorization: Bearer TOKEN, or an error with
// queue.CodeUnauthorized: what every agent face (the REST API, the MCP
// endpoint) checks before anything else.
func AuthenticateAgent(r *http.Request, store Store) (string, error) {
	hash, err := BearerHash(r)
	if err != nil {
		return "", err
	}
	return AgentByHash(r.Context(), store, hash)
}

// BearerHash is the hash of the request's bearer token, or an
// unauthorized error when it carries none.
func BearerHash(r *http.Request) (string, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", queue.Errorf(queue.CodeUnauthorized, "send an agent token as Authorization: Bearer TOKEN")
	}
	return HashToken(strings.TrimSpace(token)), nil
}

// AgentByHash is the name of the active agent token with hash, or an
// unauthorized error for a token that is unknown or revoked.
func AgentByHash(ctx context.Context, store Store, hash string) (string, error) {
	t, err := store.TokenGetByHash(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return "", queue.Errorf(queue.CodeUnauthorized, "the bearer token is unknown or revoked")
	}
	if err != nil {
		return "", err
	}
	return t.Name, nil
}
