package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/agentapi"
	"github.com/approvals/approvals/classify"
)

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
