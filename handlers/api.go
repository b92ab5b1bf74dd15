package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
)

// API serves the agent REST API under /api/v1: submit, read (with the
// long-poll) and drive actions, authenticated by agent bearer tokens.
type API struct {
	Service *queue.Service
	// Polls are the long-polls of GetAction.
	Polls *longpoll.Polls
	// Store is what the API reads directly (queue.Reader).
	Store    queue.Reader
	Accounts accounts.Store
	// MaxBody caps request bodies (APPROVALS_MAX_BODY).
	MaxBody int64
	// Logger logs the unexpected errors of detached long-polls; default
	// slog.Default().
	Logger *slog.Logger

	tokens accounts.TokenCache
}

const agentKey = "approvals.agent"

// AgentAuth accepts only a valid, unrevoked agent bearer token; a dashboard
// session cookie opens nothing here.
func (h *API) AgentAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		name, err := accounts.AuthenticateAgent(c.Request(), h.Accounts)
		if err != nil {
			return err
		}
		c.Set(agentKey, name)
		return next(c)
	}
}

const tokenGuardKey = "approvals.token_guard"

// HotAuth authenticates the hot path: submissions and the agent's drive
// calls (execute, complete, fail, cancel). Where the store checks the token
// in the statement that claims or moves the action
// (queue.Store.SupportsTokenGuard), a token seen valid before is taken from
// memory, which saves a query per request (docs/performance.md, "The token
// is checked inside the claim"). Every other refusal re-checks the token
// first, so a revoked token still gets 401 before any other refusal; a
// re-check the database could not answer leaves the token in memory.
func (h *API) HotAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !h.Store.SupportsTokenGuard() {
			return h.AgentAuth(next)(c)
		}
		r := c.Request()
		hash, err := accounts.BearerHash(r)
		if err != nil {
			return err
		}
		name, ok := h.tokens.Get(hash)
		if !ok {
			if name, err = accounts.AgentByHash(r.Context(), h.Accounts, hash); err != nil {
				return err
			}
			h.tokens.Put(hash, name)
			c.Set(agentKey, name)
			return next(c)
		}
		c.Set(agentKey, name)
		c.Set(tokenGuardKey, hash)
		err = next(c)
		if err == nil {
			return nil
		}
		if queue.ErrorCode(err) != queue.CodeUnauthorized {
			// Refused before, or apart from, the statement's own check.
			_, err2 := accounts.AgentByHash(r.Context(), h.Accounts, hash)
			if queue.ErrorCode(err2) != queue.CodeUnauthorized {
				// Valid, or not known because the database is away
				// (a failover): the token stays in memory, so the
				// agent's next report, a complete during the outage,
				// still reaches the Service, which keeps it until the
				// database answers (queue.OutcomeKeepFor). Its
				// statement checks the token when it is written.
				return err
			}
			err = err2
		}
		h.tokens.Remove(hash)
		return err
	}
}

// guard is the hash of a token HotAuth took from its cache, which the
// store must check in its statement; "" when the token was looked up.
func guard(c echo.Context) string { s, _ := c.Get(tokenGuardKey).(string); return s }

// driveContext is the request's context, carrying the token guard for the
// Service's drive calls (queue.WithTokenGuard) when there is one.
func driveContext(c echo.Context) context.Context {
	ctx := c.Request().Context()
	if g := guard(c); g != "" {
		ctx = queue.WithTokenGuard(ctx, g)
	}
	return ctx
}

func agent(c echo.Context) string { s, _ := c.Get(agentKey).(string); return s }

// emptyBody accepts no body or an empty JSON object.
func (h *API) emptyBody(c echo.Context) ([]byte, error) {
	body, err := readBody(c.Request().Body, h.MaxBody)
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		return body, err
	}
	_, err = decodeObjectFields(body, map[string]bool{})
	return body, err
}

func writeJSON(c echo.Context, status int, v any) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	c.Response().WriteHeader(status)
	if a, ok := v.(*queue.Action); ok && a != nil {
		return writeActionTo(c.Response(), a)
	}
	return jsonEncode(c.Response(), v)
}

// writeActionTo writes the action's JSON as json.Encoder would.
func writeActionTo(w io.Writer, a *queue.Action) error {
	bp := actionBuffers.Get().(*[]byte)
	defer actionBuffers.Put(bp)
	if b, ok := appendActionJSON((*bp)[:0], a); ok {
		*bp = append(b, '\n') // as json.Encoder ends a value
		_, err := w.Write(*bp)
		return err
	}
	return jsonEncode(w, a)
}

// actionBuffers recycle the buffers actions are encoded into.
var actionBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func jsonEncode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	return enc.Encode(v)
}
