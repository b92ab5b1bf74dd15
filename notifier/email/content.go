package email

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/preview"
	"github.com/approvals/approvals/queue"
)

// content is what one message says, in its three forms.
type content struct {
	Subject string
	Text    string
	HTML    string
}

// view is what the text and HTML bodies are rendered from.
type view struct {
	Event     string // "Approval needed", "Approved by ann@example.com", …
	Tool      string
	Headline  string
	Fields    []preview.Field
	IntentKey string
	Attempt   int
	AskedBy   string
	Expires   string // "" when the action no longer waits
	Note      string // the decision note, if any
	Error     string // why it failed, for action.failed
	Ticket    string // for ticket.opened: which ticket and why
	Link      string
}

func (e *Notifier) content(n queue.Notification) content {
	a := n.Action
	p := preview.Of(a)
	v := view{
		Event:     eventLine(n),
		Tool:      a.Tool,
		Headline:  preview.Headline(a),
		Fields:    p.Fields,
		IntentKey: a.IntentKey,
		Attempt:   a.Attempt,
		AskedBy:   a.RequestedBy,
		Link:      e.cfg.PublicURL + "/actions/" + a.ID,
	}
	if a.State == queue.StatePending && a.ExpiresAt != nil {
		v.Expires = formatTime(*a.ExpiresAt)
	}
	if a.DecisionNote != nil {
		v.Note = *a.DecisionNote
	}
	if n.Type == classify.EventActionFailed && a.Error != nil {
		v.Error = *a.Error
	}
	if t := n.Ticket; t != nil {
		v.Ticket = fmt.Sprintf("Ticket %s (%s) opened %s", t.ID, t.Kind, formatTime(t.OpenedAt))
	}
	var text, html bytes.Buffer
	// Both templates only read strings from v; an error could only come from the writer,
	// and a bytes.Buffer does not fail.
	_ = textBody.Execute(&text, v)
	_ = htmlBody.Execute(&html, v)
	return content{
		Subject: fmt.Sprintf("[approvals] %s: %s: %s", v.Event, a.Tool, v.Headline),
		Text:    text.String(),
		HTML:    html.String(),
	}
}

// eventLine says what happened, naming who decided where someone did.
func eventLine(n queue.Notification) string {
	a := n.Action
	by := ""
	if a.DecidedBy != nil {
		by = " by " + person(*a.DecidedBy)
	}
	switch n.Type {
	case classify.EventActionPending:
		return "Approval needed"
	case classify.EventActionReminder:
		return "Reminder: approval needed"
	case classify.EventActionEscalated:
		return "Escalated: approval needed"
	case classify.EventActionApproved:
		return "Approved" + by
	case classify.EventActionRejected:
		return "Rejected" + by
	case classify.EventActionChangesRequested:
		return "Changes requested" + by
	case classify.EventActionExpired:
		return "Expired"
	case classify.EventActionCancelled:
		return "Cancelled" + by
	case classify.EventActionDone:
		return "Done"
	case classify.EventActionFailed:
		return "Failed"
	case classify.EventTicketOpened:
		if n.Ticket != nil {
			return "Ticket opened (" + string(n.Ticket.Kind) + ")"
		}
		return "Ticket opened"
	}
	return n.Type
}

// person shows "user:ann@example.com" as the address alone; agents and "system" stay as
// they are.
func person(actor string) string {
	return strings.TrimPrefix(actor, "user:")
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// The text body is plain text: text/template, so that "<" in a payload stays "<".
var textBody = texttemplate.Must(texttemplate.New("text").Parse(`{{.Event}}: {{.Tool}}
{{.Headline}}
{{range .Fields}}
{{.Name}}: {{.Value}}{{end}}

Intent key: {{.IntentKey}} (attempt {{.Attempt}})
Asked by:   {{.AskedBy}}
{{- if .Expires}}
Expires:    {{.Expires}}{{end}}
{{- if .Note}}
Note:       {{.Note}}{{end}}
{{- if .Error}}
Error:      {{.Error}}{{end}}
{{- if .Ticket}}
{{.Ticket}}{{end}}

Open the action: {{.Link}}

This message decides nothing: approve, reject or request changes on the action page after signing in.
`))

var htmlBody = template.Must(template.New("html").Parse(`<!doctype html>
<html><body style="font-family: sans-serif">
<p><strong>{{.Event}}</strong>: <code>{{.Tool}}</code></p>
<h2 style="font-size: 1.1em">{{.Headline}}</h2>
{{if .Fields}}<table>{{range .Fields}}
<tr><th align="left" valign="top">{{.Name}}</th><td style="white-space: pre-wrap">{{.Value}}</td></tr>{{end}}
</table>{{end}}
<table>
<tr><th align="left">Intent key</th><td><code>{{.IntentKey}}</code> (attempt {{.Attempt}})</td></tr>
<tr><th align="left">Asked by</th><td>{{.AskedBy}}</td></tr>
{{- if .Expires}}
<tr><th align="left">Expires</th><td>{{.Expires}}</td></tr>{{end}}
{{- if .Note}}
<tr><th align="left">Note</th><td style="white-space: pre-wrap">{{.Note}}</td></tr>{{end}}
{{- if .Error}}
<tr><th align="left">Error</th><td style="white-space: pre-wrap">{{.Error}}</td></tr>{{end}}
{{- if .Ticket}}
<tr><th align="left">Ticket</th><td>{{.Ticket}}</td></tr>{{end}}
</table>
<p><a href="{{.Link}}">Open the action</a></p>
<p style="color: #666">This message decides nothing: approve, reject or request changes on the action page after signing in.</p>
</body></html>
`))

// planView is what a plan's message is rendered from: every step, each
// with its tool's preview and its whole payload.
type planView struct {
	Event     string
	Title     string
	Steps     []planStepView
	Required  int
	Approvals int
	AskedBy   string
	Expires   string
	Note      string
	Link      string
}

type planStepView struct {
	N         int
	Tool      string
	Class     string
	Decision  string
	IntentKey string
	Headline  string
	Fields    []preview.Field
	Payload   string
	Warnings  string
}

// planContent is a plan's message: it lists every step whole (mail has
// room), the approvals the plan needs and the link to its page.
func (e *Notifier) planContent(n queue.Notification) content {
	pl := n.Plan
	v := planView{Event: planEventLine(n), Title: pl.Title, Required: pl.ApprovalsRequired, Approvals: len(pl.Approvals),
		AskedBy: pl.Agent, Link: e.cfg.PublicURL + "/plans/" + pl.ID}
	if pl.State == queue.PlanPending {
		v.Expires = formatTime(pl.ExpiresAt)
	}
	if pl.DecisionNote != nil {
		v.Note = *pl.DecisionNote
	}
	for i, st := range pl.Steps {
		sv := planStepView{N: st.N, Tool: st.Tool, Class: string(st.Class), Decision: st.Decision, IntentKey: st.IntentKey,
			Payload: queue.ReadableJSON(string(st.Payload)), Warnings: strings.Join(st.Warnings, ", ")}
		if st.Rule != "" {
			sv.Decision += " (rule " + st.Rule + ")"
		}
		if i < len(n.PlanSteps) {
			sv.Headline, sv.Fields = preview.Headline(n.PlanSteps[i]), preview.Of(n.PlanSteps[i]).Fields
		}
		v.Steps = append(v.Steps, sv)
	}
	var text, html bytes.Buffer
	_ = planTextBody.Execute(&text, v)
	_ = planHTMLBody.Execute(&html, v)
	return content{
		Subject: fmt.Sprintf("[approvals] %s: plan of %d steps: %s", v.Event, len(pl.Steps), firstLine(pl.Title)),
		Text:    text.String(),
		HTML:    html.String(),
	}
}

// planEventLine says what happened to a plan.
func planEventLine(n queue.Notification) string {
	pl := n.Plan
	by := ""
	if pl.DecidedBy != nil {
		by = " by " + person(*pl.DecidedBy)
	}
	switch n.Type {
	case classify.EventPlanPending:
		return "Approval needed"
	case classify.EventPlanReminder:
		return "Reminder: approval needed"
	case classify.EventPlanEscalated:
		return "Escalated: approval needed"
	case classify.EventPlanApproved:
		return "Approved" + by
	case classify.EventPlanRejected:
		return "Rejected" + by
	case classify.EventPlanChangesRequested:
		return "Changes requested" + by
	case classify.EventPlanCancelled:
		return "Cancelled" + by
	case classify.EventPlanExpired:
		return "Expired"
	}
	return n.Type
}

// firstLine is s up to its first line break, cut at 120 characters.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "…"
	}
	return s
}

var planTextBody = texttemplate.Must(texttemplate.New("plantext").Parse(`{{.Event}}: plan "{{.Title}}"
{{len .Steps}} steps, asked by {{.AskedBy}}; needs {{.Required}} approval(s), {{.Approvals}} so far.
{{- if .Expires}}
Expires: {{.Expires}}{{end}}
{{- if .Note}}
Note:    {{.Note}}{{end}}
{{range .Steps}}
Step {{.N}}: {{.Tool}} ({{.Class}}; {{.Decision}})
  Intent key: {{.IntentKey}}
{{- if .Headline}}
  {{.Headline}}{{end}}
{{- range .Fields}}
  {{.Name}}: {{.Value}}{{end}}
  Payload: {{.Payload}}
{{- if .Warnings}}
  Warnings: {{.Warnings}}{{end}}
{{end}}
Open the plan: {{.Link}}

This message decides nothing: approve, reject or request changes on the plan page after signing in.
`))

var planHTMLBody = template.Must(template.New("planhtml").Parse(`<!doctype html>
<html><body style="font-family: sans-serif">
<p><strong>{{.Event}}</strong>: plan of {{len .Steps}} steps, asked by {{.AskedBy}}</p>
<h2 style="font-size: 1.1em">{{.Title}}</h2>
<p>Needs {{.Required}} approval(s), {{.Approvals}} so far.{{if .Expires}} Expires {{.Expires}}.{{end}}</p>
{{- if .Note}}
<p style="white-space: pre-wrap">Note: {{.Note}}</p>{{end}}
{{range .Steps}}
<h3 style="font-size: 1em">Step {{.N}}: <code>{{.Tool}}</code> ({{.Class}}; {{.Decision}})</h3>
<table>
<tr><th align="left">Intent key</th><td><code>{{.IntentKey}}</code></td></tr>
{{- range .Fields}}
<tr><th align="left" valign="top">{{.Name}}</th><td style="white-space: pre-wrap">{{.Value}}</td></tr>{{end}}
<tr><th align="left" valign="top">Payload</th><td><pre style="white-space: pre-wrap">{{.Payload}}</pre></td></tr>
{{- if .Warnings}}
<tr><th align="left">Warnings</th><td>{{.Warnings}}</td></tr>{{end}}
</table>
{{end}}
<p><a href="{{.Link}}">Open the plan</a></p>
<p style="color: #666">This message decides nothing: approve, reject or request changes on the plan page after signing in.</p>
</body></html>
`))
