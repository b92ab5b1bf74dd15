package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/web/agentapi"
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

// Submit handles POST /api/v1/actions.
func (h *API) Submit(c echo.Context) error {
	body, err := readBody(c.Request().Body, h.MaxBody)
	if err != nil {
		return err
	}
	sb, err := DecodeSubmit(body, c.Request().Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	dry, err := dryRun(c.QueryParam("dry_run"))
	if err != nil {
		return err
	}
	if dry {
		return h.dryRun(c, sb)
	}
	res, err := h.Service.Submit(c.Request().Context(), queue.SubmitRequest{
		Tool: sb.Tool, Payload: sb.Payload, IntentKey: sb.IntentKey, Agent: agent(c), Channel: "api",
		TokenHash: guard(c), Plan: sb.Plan})
	if err != nil {
		return err
	}
	if res.Created {
		c.Response().Header().Set("Location", "/api/v1/actions/"+res.Action.ID)
		return writeJSON(c, http.StatusCreated, res.Action)
	}
	c.Response().Header().Set("Idempotent-Replayed", "true")
	return writeJSON(c, http.StatusOK, res.Action)
}

// dryRun reads the dry_run parameter: true, false, or absent (false).
func dryRun(v string) (bool, error) {
	switch v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, queue.Errorf(queue.CodeInvalidRequest, "dry_run must be true or false, not %q", v)
}

// dryRun answers POST /api/v1/actions?dry_run=true: what the submission
// would do, 200 whatever the outcome, writing nothing. No statement checks
// a token HotAuth took from its cache, so the token is looked up here.
func (h *API) dryRun(c echo.Context, sb SubmitBody) error {
	if hash := guard(c); hash != "" {
		if _, err := accounts.AgentByHash(c.Request().Context(), h.Accounts, hash); err != nil {
			return err
		}
	}
	res, err := h.Service.DryRun(c.Request().Context(), queue.SubmitRequest{
		Tool: sb.Tool, Payload: sb.Payload, IntentKey: sb.IntentKey, Agent: agent(c), Channel: "api"})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, res)
}

// ListActions handles GET /api/v1/actions.
func (h *API) ListActions(c echo.Context) error {
	r, err := agentapi.ParseListRequest(c.QueryParams().Get)
	if err != nil {
		return err
	}
	list, next, err := h.Service.List(c.Request().Context(), r)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, agentapi.NewActionList(list, next))
}

// Tools handles GET /api/v1/tools.
func (h *API) Tools(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]any{
		"tools":    agentapi.ToolViews(h.Service.Registry()),
		"guidance": "If a call times out, do not retry: read the action first (GET /api/v1/actions?intent_key=K). " + classify.ChangesRequestedAdvice,
	})
}

// Execute handles POST /api/v1/actions/{id}/execute.
func (h *API) Execute(c echo.Context) error {
	if _, err := h.emptyBody(c); err != nil {
		return err
	}
	a, err := h.Service.Execute(driveContext(c), c.Param("id"), agent(c), "api")
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a)
}

// Complete handles POST /api/v1/actions/{id}/complete.
func (h *API) Complete(c echo.Context) error {
	body, err := readBody(c.Request().Body, h.MaxBody)
	if err != nil {
		return err
	}
	raw, err := decodeObjectFields(body, map[string]bool{"result": true})
	if err != nil {
		return err
	}
	result, ok := raw["result"]
	if !ok {
		return queue.Errorf(queue.CodeInvalidRequest, "result is required")
	}
	res, err := h.Service.Complete(driveContext(c), c.Param("id"), agent(c), result, "api")
	return h.drive(c, res, err)
}

// Fail handles POST /api/v1/actions/{id}/fail.
func (h *API) Fail(c echo.Context) error {
	body, err := readBody(c.Request().Body, h.MaxBody)
	if err != nil {
		return err
	}
	raw, err := decodeObjectFields(body, map[string]bool{"error": true})
	if err != nil {
		return err
	}
	var text string
	if e, ok := raw["error"]; !ok || json.Unmarshal(e, &text) != nil || strings.TrimSpace(text) == "" {
		return queue.Errorf(queue.CodeInvalidRequest, "error is required: a string saying why the effect definitely did not happen")
	}
	res, err := h.Service.Fail(driveContext(c), c.Param("id"), agent(c), text, "api")
	return h.drive(c, res, err)
}

// Cancel handles POST /api/v1/actions/{id}/cancel.
func (h *API) Cancel(c echo.Context) error {
	if _, err := h.emptyBody(c); err != nil {
		return err
	}
	res, err := h.Service.Cancel(driveContext(c), c.Param("id"), agent(c), "api")
	return h.drive(c, res, err)
}

func (h *API) drive(c echo.Context, res queue.DriveResult, err error) error {
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	return writeJSON(c, http.StatusOK, res.Action)
}

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

// Verify handles POST /api/v1/actions/{id}/verify: the agent whose action is
// in_progress asks the tool's verifier now (docs/verifiers.md) and gets
// the verdict, the reason, when it was checked and the action as it then is.
func (h *API) Verify(c echo.Context) error {
	if _, err := h.emptyBody(c); err != nil {
		return err
	}
	check, err := h.Service.Tickets().Verify(c.Request().Context(), queue.VerifyRequest{ActionID: c.Param("id"),
		Agent: "agent:" + agent(c), By: "agent:" + agent(c)})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, check)
}
