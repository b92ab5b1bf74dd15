package handlers

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

// Submit handles POST /api/v1/actions.
func (h *API) Submit(c echo.Context) error {
	body, err := readBody(c.Request().Body, h.MaxBody)
	if err != nil {
		return err
	}
	// Two keys name two intents: which one the agent meant is not for the
	// server to guess, as with a header and a body key that differ.
	if keys := c.Request().Header.Values("Idempotency-Key"); len(keys) > 1 {
		return queue.Errorf(queue.CodeInvalidRequest, "the Idempotency-Key header is given %d times; send it once", len(keys))
	}
	sb, err := DecodeSubmit(body, c.Request().Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	dry, err := dryRun(c.QueryParams())
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

// dryRun reads the dry_run parameter: true, false, or absent (false). One
// given without a value (?dry_run, a flag to many clients, or ?dry_run=)
// is refused like any other value: taken as false it would submit for
// real what its caller asked only to try.
func dryRun(q url.Values) (bool, error) {
	if !q.Has("dry_run") {
		return false, nil
	}
	switch v := q.Get("dry_run"); v {
	case "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, queue.Errorf(queue.CodeInvalidRequest, "dry_run must be true or false, not %q", v)
	}
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
		Tool: sb.Tool, Payload: sb.Payload, IntentKey: sb.IntentKey, Agent: agent(c), Channel: "api", Plan: sb.Plan})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, res)
}
