package handlers

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
)

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
