package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// ShowAction handles GET /actions/{id}.
func (d *Dashboard) ShowAction(c echo.Context) error {
	a, err := d.getAction(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	v, err := d.actionView(c, a)
	if err != nil {
		return err
	}
	comp, err := d.actionPage(c, v)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, comp)
}

// actionView gathers everything the action page shows.
func (d *Dashboard) actionView(c echo.Context, a *queue.Action) (templates.ActionView, error) {
	ctx := c.Request().Context()
	v := templates.ActionView{Now: d.Service.Now(), Action: a, ShowURLPaths: isAdmin(c)}
	// Both diffs of the page (an edit, a revision) share one word-diff budget.
	budget := templates.NewDiffBudget()
	v.Payload, v.PayloadCompact = templates.PrettyJSONBounded(a.Payload)
	v.Result, v.ResultCompact = templates.PrettyJSONBounded(a.Result)
	shown := a
	if len(a.ApprovedPayload) > 0 && !queue.JSONEqual(a.ApprovedPayload, a.Payload) {
		v.ApprovedPayload, v.ApprovedCompact = templates.PrettyJSONBounded(a.ApprovedPayload)
		v.Diff = templates.NewDiffView(a.Payload, a.ApprovedPayload, "Submitted payload and the approved edit", "Submitted", "Approved", budget)
		// The preview shows what is executed: the edit.
		edited := *a
		edited.Payload, shown, v.PreviewEdited = a.ApprovedPayload, &edited, true
	}
	v.PreviewTitle, v.Preview = previewFields(shown)
	// The edit box cannot mark invisible characters, so it shows them as
	// escapes: the same JSON value, and nothing hidden.
	v.Form.Payload = queue.EscapeInvisible(v.Payload)
	if u := currentUser(c); u != nil {
		v.CanDecide = u.Role.CanDecide()
	}
	if s := session(c); s != nil {
		v.CSRF = stringValue(s, csrfValue)
	}
	events, err := queue.Timeline(ctx, d.Store, a.ID)
	if err != nil {
		return v, err
	}
	for _, e := range events {
		v.Events = append(v.Events, eventView(e, v.ShowURLPaths))
	}
	v.Decider = deciderView(a, events)
	if v.CanDecide && a.State == queue.StatePending {
		v.Grant = d.grantOffer(a)
		v.Form.Grant.For = defaultGrantFor(v.Grant)
		if v.Grant != nil {
			v.Form.Grant.Uses = strconv.Itoa(v.Grant.DefaultUses)
		}
	}
	// At-least-once keys are informational: they tie no attempts together.
	if a.Class != classify.AtLeastOnce && a.IntentKey != "" {
		attempts, err := d.Store.ActionList(ctx, queue.ActionListParams{IntentKey: a.IntentKey, Limit: 200})
		if err != nil {
			return v, err
		}
		for _, o := range attempts {
			if o.ID != a.ID {
				v.Attempts = append(v.Attempts, o)
			}
		}
	}
	v.Quorum = quorumView(a)
	if v.Notifications, err = d.Store.NotificationList(ctx, a.ID); err != nil {
		return v, err
	}
	v.Revision = revisionView(a, v.Attempts, budget)
	// The neighbours in the queue, for j and k.
	at := queue.EncodeCursor(queue.Cursor{CreatedAt: a.CreatedAt, ID: a.ID})
	for _, oldest := range []bool{true, false} {
		list, _, err := d.Service.List(ctx, queue.ListRequest{State: queue.StatePending, Oldest: oldest, Cursor: at, Limit: 1})
		if err != nil {
			return v, err
		}
		if len(list) == 1 && oldest {
			v.NextID = list[0].ID
		} else if len(list) == 1 {
			v.PrevID = list[0].ID
		}
	}
	return v, nil
}

// deciderView is what decided the action at its submission, from the
// events that recorded it: a policy rule (with its expression, as it was
// then) or a grant (with the person who granted it).
func deciderView(a *queue.Action, events []queue.Event) *templates.DeciderView {
	if a.DecidedByRule() == "" && a.GrantID == "" {
		return nil
	}
	for _, e := range events {
		var data struct {
			Rule, Expression, Note, Grant string
			Decision                      string
			GrantedBy                     string   `json:"granted_by"`
			HeldFor                       []string `json:"held_for"`
		}
		_ = json.Unmarshal(e.Data, &data)
		switch {
		case e.Channel == queue.PolicyChannel && data.Rule != "":
			return &templates.DeciderView{Rule: data.Rule, Expression: data.Expression, Decision: data.Decision, Note: data.Note, HeldFor: data.HeldFor}
		case e.Channel == queue.GrantChannel && e.Kind == queue.EventApproved && data.Grant != "":
			return &templates.DeciderView{GrantID: data.Grant, GrantedBy: data.GrantedBy}
		}
	}
	return nil
}

// grantDurations are the grant lengths the form offers, cut at the tool's
// grants.max (which is offered too).
var grantDurations = []time.Duration{15 * time.Minute, time.Hour, 4 * time.Hour, 8 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// grantOffer is "Approve and allow similar" for a pending action whose
// tool takes grants (in the tools file now in force), or nil: never for a
// tool the tools file does not name nor for an action with a warning only
// a person may accept (queue.UnseenRisks), whose later likes no person
// would see (the Service refuses such a grant too).
func (d *Dashboard) grantOffer(a *queue.Action) *templates.GrantOffer {
	tool, registered := d.Service.Registry().Lookup(a.Tool)
	if !registered || len(queue.UnseenRisks(a.Warnings)) > 0 {
		return nil
	}
	limits, err := tool.GrantLimits()
	if err != nil || a.ApprovalsRequired > 1 {
		return nil
	}
	g := &templates.GrantOffer{MaxUses: limits.MaxUses, DefaultUses: queue.DefaultGrantUses, Agent: a.RequestedBy}
	if limits.MaxUses > 0 {
		g.DefaultUses = min(limits.MaxUses, queue.DefaultGrantUses)
	}
	for _, dur := range grantDurations {
		if dur < limits.Max {
			g.Durations = append(g.Durations, classify.FormatDuration(dur))
		}
	}
	g.Durations = append(g.Durations, classify.FormatDuration(limits.Max))
	if payload, err := queue.DecodeObject(a.Payload); err == nil {
		g.Fields = grantFields(payload, "", 0)
	}
	return g
}

// defaultGrantFor is 8h, or the longest the tool allows when shorter.
func defaultGrantFor(g *templates.GrantOffer) string {
	if g == nil || len(g.Durations) == 0 {
		return ""
	}
	for _, d := range g.Durations {
		if d == "8h" {
			return d
		}
	}
	return g.Durations[len(g.Durations)-1]
}

// grantFields are the payload's fields a grant may hold fixed: every value
// that is not an object, by its dotted path, objects followed three deep
// (arrays are compared whole).
func grantFields(obj map[string]any, prefix string, depth int) []templates.Field {
	var out []templates.Field
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k == "" || strings.Contains(k, ".") || strings.Trim(k, "0123456789") == "" {
			continue // not addressable by a dotted path
		}
		path := prefix + k
		if sub, ok := obj[k].(map[string]any); ok && depth < 2 {
			out = append(out, grantFields(sub, path+".", depth+1)...)
			continue
		}
		b, _ := json.Marshal(obj[k])
		out = append(out, templates.Field{Name: path, Value: string(b)})
		if len(out) >= queue.MaxGrantFields*2 {
			break
		}
	}
	return out
}

// quorumView says who approved so far and who may still decide: the
// eligible people of the action's tool snapshot who have not approved.
func quorumView(a *queue.Action) templates.QuorumView {
	q := templates.QuorumView{Approvals: a.Approvals, Required: a.Spec.Approval.RequiredApprovals()}
	if a.State == queue.StatePending {
		q.Still = max(q.Required-len(a.Approvals), 0)
	}
	rule := a.Spec.Approval
	if rule == nil || len(rule.Approvers) == 0 {
		q.Anyone = true
		return q
	}
	people := rule.ApproverEmails
	q.MayDecideGroups = slices.Clone(rule.ApproverIdPGroups)
	if a.EscalatedAt != nil {
		people = append(slices.Clone(people), rule.EscalateEmails...)
		for _, g := range rule.EscalateIdPGroups {
			if !slices.Contains(q.MayDecideGroups, g) {
				q.MayDecideGroups = append(q.MayDecideGroups, g)
			}
		}
	}
	for _, email := range people {
		if !a.Approved("user:"+email) && !slices.Contains(q.MayDecide, email) {
			q.MayDecide = append(q.MayDecide, email)
		}
	}
	return q
}

// revisionView is set on an attempt that follows a change request: the
// note that asked for the revision and what changed in the payload.
func revisionView(a *queue.Action, others []*queue.Action, budget *templates.DiffBudget) *templates.RevisionView {
	for _, o := range others {
		if o.Attempt == a.Attempt-1 && o.State == queue.StateChangesRequested {
			r := &templates.RevisionView{Earlier: o,
				Diff: templates.NewDiffView(o.Payload, a.Payload, "The earlier attempt's payload and this one", "Attempt "+strconv.Itoa(o.Attempt), "Attempt "+strconv.Itoa(a.Attempt), budget)}
			if o.DecisionNote != nil {
				r.Note = *o.DecisionNote
			}
			return r
		}
	}
	return nil
}

// eventView pulls a decision's note and edited fields out of its data,
// and keeps the rest of the data to show.
func eventView(e queue.Event, admin bool) templates.EventView {
	v := templates.EventView{Event: e}
	var data map[string]json.RawMessage
	if len(e.Data) == 0 || json.Unmarshal(e.Data, &data) != nil {
		v.Data = classify.ShownURLsIn(templates.PrettyJSON(e.Data), admin)
		return v
	}
	_ = json.Unmarshal(data["note"], &v.Note)
	_ = json.Unmarshal(data["changed_fields"], &v.Changed)
	delete(data, "note")
	delete(data, "changed_fields")
	if len(data) > 0 {
		v.Data = classify.ShownURLsIn(templates.PrettyJSON(e.Data), admin)
	}
	return v
}

// actionPage is the whole page, or for htmx only the #action fragment.
func (d *Dashboard) actionPage(c echo.Context, v templates.ActionView) (templ.Component, error) {
	if isHX(c) {
		return templates.ActionDetail(v), nil
	}
	title := v.PreviewTitle
	if title == "" {
		title = v.Action.Tool
	}
	p, err := d.page(c, templates.Truncate(title, 60), "queue")
	if err != nil {
		return nil, err
	}
	p.Live = true
	return templates.ActionPage(p, v), nil
}

// getAction reads an action, naming it when it does not exist.
func (d *Dashboard) getAction(ctx context.Context, id string) (*queue.Action, error) {
	a, err := d.Store.ActionGetByID(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		return nil, notFound("action", id)
	}
	return a, err
}
