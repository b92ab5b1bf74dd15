// Package templates renders the dashboard: one .templ file per page, its
// view model in the .go file of the same name, and small exported partials
// that htmx reloads. Everything user-supplied is rendered as text: templ
// escapes it, and nothing here uses templ.Raw.
package templates

import "github.com/a-h/templ"

// Assets are the versioned URLs of the static files.
type Assets struct {
	CSS  string
	HTMX string
	App  string
}

// Viewer is the signed-in staff member.
type Viewer struct {
	Email         string
	Role          string
	CanDecide     bool
	CanResolve    bool
	CanAdminister bool
}

// Page is what the layout of every page needs.
type Page struct {
	Title string
	// Nav names the current section: queue, search, tickets, overview, audit, tools,
	// grants, users or tokens.
	Nav         string
	CSRF        string
	Viewer      *Viewer // nil before login
	OpenTickets int64
	Assets      Assets
	// Live subscribes the page to the server-sent events at /events.
	Live bool
}

// htmxConfig keeps htmx within the Content-Security-Policy (no inline
// styles, no eval) and lets it swap the 4xx answers that re-show a form
// with its error.
const htmxConfig = `{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"historyCacheSize":0,` +
	`"responseHandling":[{"code":"204","swap":false},{"code":"[23]..","swap":true},` +
	`{"code":"(400|403|404|409|422|429)","swap":true,"error":false},{"code":"[45]..","swap":false,"error":true}]}`

func navAttrs(p Page, name string) templ.Attributes {
	if p.Nav == name {
		return templ.Attributes{"aria-current": "page"}
	}
	return templ.Attributes{}
}
