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
