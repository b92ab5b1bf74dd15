package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/agentapi"
	"github.com/approvals/approvals/queue"
)

// PlanBody is the body of POST /api/v1/plans.
type PlanBody struct {
	Title        string
	Steps        []queue.PlanStepRequest
	Ordered      bool
	ExpiresAfter time.Duration
}

// DecodePlan parses and checks a plan's body: every failure is an
// invalid_request naming the field (a step's by its number from 1).
func DecodePlan(body []byte) (PlanBody, error) {
	var pb PlanBody
	if err := stepNUL(body); err != nil {
		return pb, err
	}
	raw, err := decodeObjectFields(body, map[string]bool{"title": true, "steps": true, "ordered": true, "expires_after": true})
	if err != nil {
		return pb, err
	}
	if t, ok := raw["title"]; !ok || decodeString(t, &pb.Title) != nil || !printable(pb.Title) {
		return pb, queue.Errorf(queue.CodeInvalidRequest, "title is required: a string of printable characters")
	}
	if o, ok := raw["ordered"]; ok {
		if err := json.Unmarshal(o, &pb.Ordered); err != nil {
			return pb, queue.Errorf(queue.CodeInvalidRequest, "ordered must be true or false")
		}
	}
	if e, ok := raw["expires_after"]; ok {
		var s string
		if err := decodeString(e, &s); err != nil {
			return pb, queue.Errorf(queue.CodeInvalidRequest, "expires_after must be a Go duration string such as \"24h\"")
		}
		if pb.ExpiresAfter, err = time.ParseDuration(s); err != nil || pb.ExpiresAfter <= 0 {
			return pb, queue.Errorf(queue.CodeInvalidRequest, "expires_after: %q is not a positive Go duration such as \"24h\"", s)
		}
	}
	var steps []json.RawMessage
	if s, ok := raw["steps"]; !ok || json.Unmarshal(s, &steps) != nil {
		return pb, queue.Errorf(queue.CodeInvalidRequest, "steps is required: an array of {tool, payload, intent_key?}")
	}
	if len(steps) == 0 || len(steps) > queue.MaxPlanSteps {
		return pb, queue.Errorf(queue.CodeInvalidRequest, "steps: a plan has 1 to %d steps, not %d", queue.MaxPlanSteps, len(steps))
	}
	for i, s := range steps {
		sb, err := DecodeSubmit(s, "")
		if err == nil && sb.Plan != "" {
			err = queue.Errorf(queue.CodeInvalidRequest, "a step names no plan")
		}
		if err != nil {
			return pb, stepError(i, err)
		}
		pb.Steps = append(pb.Steps, queue.PlanStepRequest{Tool: sb.Tool, Payload: sb.Payload, IntentKey: sb.IntentKey})
	}
	return pb, nil
}

// stepError names the step at index i by its number from 1.
func stepError(i int, err error) error {
	var e *queue.Error
	if errors.As(err, &e) {
		return queue.Errorf(e.Code, "steps[%d]: %s", i+1, e.Detail)
	}
	return err
}

// stepNUL refuses a NUL character inside a step as that step's submission
// would, naming the step by its number from 1 as every other fault of a
// step is named; the body's own check would name it by its index from 0
// ("steps[0].tool"), which reads as another step.
func stepNUL(body []byte) error {
	if !bytes.Contains(body, []byte(`\u0000`)) || !utf8.Valid(body) {
		return nil
	}
	var top struct {
		Steps []json.RawMessage `json:"steps"`
	}
	if json.Unmarshal(body, &top) != nil {
		return nil // the body's own checks say what is wrong
	}
	for i, s := range top.Steps {
		if !bytes.Contains(s, []byte(`\u0000`)) {
			continue
		}
		if _, err := DecodeSubmit(s, ""); err != nil {
			return stepError(i, err)
		}
	}
	return nil
}

// ProposePlan handles POST /api/v1/plans (and ?dry_run=true).
func (h *API) ProposePlan(c echo.Context) error {
	body, err := readBody(c.Request().Body, h.MaxBody)
	if err != nil {
		return err
	}
	pb, err := DecodePlan(body)
	if err != nil {
		return err
	}
	dry, err := dryRun(c.QueryParams())
	if err != nil {
		return err
	}
	res, err := h.Service.Plans().Propose(c.Request().Context(), queue.PlanRequest{Title: pb.Title, Steps: pb.Steps,
		Ordered: pb.Ordered, ExpiresAfter: pb.ExpiresAfter, Agent: agent(c), Channel: "api", DryRun: dry})
	if err != nil {
		return err
	}
	if dry {
		return writeJSON(c, http.StatusOK, res.Plan)
	}
	c.Response().Header().Set("Location", "/api/v1/plans/"+res.Plan.ID)
	return writeJSON(c, http.StatusCreated, res.Plan)
}

// GetPlan handles GET /api/v1/plans/{id} (and ?wait=, ?state=).
func (h *API) GetPlan(c echo.Context) error {
	wait, err := agentapi.ParseWait(c.QueryParam("wait"))
	if err != nil {
		return err
	}
	until, err := queue.ParsePlanState(c.QueryParam("state"))
	if err != nil {
		return err
	}
	release := func() {}
	if wait > 0 {
		// A plan's long-poll counts against the agent's waiters as an
		// action's does, and gives its slot back before it answers.
		var err error
		if release, err = h.Polls.AcquireWaiter("agent:" + agent(c)); err != nil {
			return err
		}
		defer release() // on a panic
	}
	pl, err := h.Service.Plans().Wait(c.Request().Context(), c.Param("id"), until, wait)
	release()
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, pl)
}

// ListPlans handles GET /api/v1/plans?state=.
func (h *API) ListPlans(c echo.Context) error {
	state, err := queue.ParsePlanState(c.QueryParam("state"))
	if err != nil {
		return err
	}
	limit := 50
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 200 {
			return queue.Errorf(queue.CodeInvalidRequest, "limit must be 1-200, not %q", v)
		}
	}
	plans, err := h.Service.Plans().List(c.Request().Context(), state, limit)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"plans": plans})
}

// CancelPlan handles POST /api/v1/plans/{id}/cancel.
func (h *API) CancelPlan(c echo.Context) error {
	if _, err := h.emptyBody(c); err != nil {
		return err
	}
	pl, err := h.Service.Plans().Cancel(c.Request().Context(), c.Param("id"), agent(c), "api")
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, pl)
}
