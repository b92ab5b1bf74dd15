package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// bulkRow is one row of a bulk decision's answer.
type bulkRow struct{ id, outcome, text, title string }

// bulkRows reads the rows of the outcome list by their data-testid.
func bulkRows(t *testing.T, body string) []bulkRow {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var rows []bulkRow
	for n := range doc.Descendants() {
		if attr(n, "data-testid") != "bulk-row" {
			continue
		}
		r := bulkRow{id: attr(n, "data-id"), outcome: attr(n, "data-outcome")}
		for c := range n.Descendants() {
			switch {
			case attr(c, "data-testid") == "outcome":
				r.text = textOf(c)
			case c.Type == html.ElementNode && c.Data == "a":
				r.title = textOf(c)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func attr(n *html.Node, key string) string {
	if n.Type != html.ElementNode {
		return ""
	}
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func textOf(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return strings.TrimSpace(b.String())
}

func TestDashboardBulkDecisions(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)

	t.Run("roles", func(t *testing.T) {
		t.Parallel()
		for i, role := range []accounts.Role{accounts.RoleAdmin, accounts.RoleApprover, accounts.RoleOps, accounts.RoleViewer} {
			email := fmt.Sprintf("bulk-role%d@example.com", i)
			d.AddUser(email, role)
			b := d.Login(email)
			a := d.SubmitEmail(fmt.Sprintf("bulk-role%d", i), "Hello", "Body")
			res := b.Post("/actions/bulk", url.Values{"ids": {a.ID}, "decision": {"approve"}})
			queuePage := b.Get("/")
			if role.CanDecide() {
				res.WantStatus(t, http.StatusOK)
				queuePage.WantContains(t, `data-testid="bulk-bar"`)
				continue
			}
			res.WantStatus(t, http.StatusForbidden)
			if strings.Contains(queuePage.Body, `data-testid="bulk-bar"`) {
				t.Errorf("%s sees the bulk form", role)
			}
			if got := d.Action(a.ID); got.State != queue.StatePending {
				t.Errorf("%s bulk-approved %s", role, a.ID)
			}
		}
	})

	t.Run("outcomes", func(t *testing.T) {
		t.Parallel()
		a := d.SubmitEmail("bulk-o1", "First <b>subject</b>", "Body")
		b := d.SubmitEmail("bulk-o2", "Second", "Body")
		taken := d.SubmitEmail("bulk-o3", "Third", "Body")
		if _, err := d.Service.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: taken.ID, By: "user:bob@example.com"}); err != nil {
			t.Fatal(err)
		}
		unknown := queue.NewID(d.Now())
		res := ann.Post("/actions/bulk", url.Values{"ids": {a.ID, b.ID, a.ID, taken.ID, unknown}, "decision": {"approve"}, "note": {"all fine"}})
		res.WantStatus(t, http.StatusOK)
		want := []bulkRow{
			{a.ID, "decided", "decided", "Your order: First <b>subject</b>"},
			{b.ID, "decided", "decided", ""},
			{taken.ID, "already decided", "already decided by bob@example.com", ""},
			{unknown, "not pending", "not pending", ""},
		}
		got := bulkRows(t, res.Body)
		if len(got) != len(want) {
			t.Fatalf("%d rows, want %d:\n%s", len(got), len(want), apptest.TruncateBody(res.Body))
		}
		for i, w := range want {
			g := got[i]
			if g.id != w.id || g.outcome != w.outcome || g.text != w.text || w.title != "" && !strings.Contains(g.title, "First <b>subject</b>") {
				t.Errorf("row %d: %+v, want %+v", i, g, w)
			}
		}
		// The unknown id's row says why it is "not pending"; a title with
		// markup is text.
		res.WantContains(t, "no such action", "First &lt;b&gt;subject&lt;/b&gt;")
		if got := d.Action(a.ID); got.State != queue.StateApproved || *got.DecisionNote != "all fine" {
			t.Errorf("%s is %s", a.ID, got.State)
		}
		// htmx gets the list alone.
		c := d.SubmitEmail("bulk-o4", "Fourth", "Body")
		frag := ann.Post("/actions/bulk", url.Values{"ids": {c.ID}, "decision": {"reject"}, "note": {"no"}}, "HX-Request", "true")
		frag.WantStatus(t, http.StatusOK)
		if strings.Contains(frag.Body, "<html") || len(bulkRows(t, frag.Body)) != 1 {
			t.Errorf("htmx answer:\n%s", apptest.TruncateBody(frag.Body))
		}
	})

	t.Run("reject without a note re-shows the form", func(t *testing.T) {
		t.Parallel()
		a := d.SubmitEmail("bulk-n1", "Hello", "Body")
		res := ann.Post("/actions/bulk", url.Values{"ids": {a.ID}, "decision": {"reject"}, "note": {"  "}})
		res.WantStatus(t, http.StatusUnprocessableEntity)
		res.WantContains(t, "a note is required to reject", `id="bulk-form"`)
		doc, err := html.Parse(strings.NewReader(res.Body))
		if err != nil {
			t.Fatal(err)
		}
		checked := false
		for n := range doc.Descendants() {
			if attr(n, "data-select-row") == a.ID {
				for _, at := range n.Attr {
					checked = checked || at.Key == "checked"
				}
			}
		}
		if !checked {
			t.Errorf("the selection is not kept")
		}
		if got := d.Action(a.ID); got.State != queue.StatePending {
			t.Errorf("a refused bulk rejection moved %s to %s", a.ID, got.State)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		t.Parallel()
		a := d.SubmitEmail("bulk-b1", "Hello", "Body")
		many := url.Values{"decision": {"approve"}}
		for range queue.MaxBulk {
			many.Add("ids", queue.NewID(d.Now()))
		}
		many.Add("ids", a.ID)
		for _, tc := range []struct {
			name   string
			form   url.Values
			status int
		}{
			{"over 200 ids", many, http.StatusBadRequest},
			{"no ids", url.Values{"decision": {"approve"}}, http.StatusBadRequest},
			{"unknown decision", url.Values{"ids": {a.ID}, "decision": {"delete"}}, http.StatusBadRequest},
			{"no CSRF token", url.Values{"ids": {a.ID}, "decision": {"approve"}, "_csrf": {""}}, http.StatusForbidden},
		} {
			res := ann.Post("/actions/bulk", tc.form)
			if res.Status != tc.status {
				t.Errorf("%s: status %d, want %d", tc.name, res.Status, tc.status)
			}
		}
		if got := d.Action(a.ID); got.State != queue.StatePending {
			t.Errorf("a refused bulk request moved %s to %s", a.ID, got.State)
		}
	})
}

// TestDashboardBulkRace: two approvers submit overlapping selections at
// the same moment; each action is decided once and the two answers agree
// on who decided which.
func TestDashboardBulkRace(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	staff := []string{"ann@example.com", "bob@example.com"}
	browsers := make([]*apptest.Browser, 2)
	for i, email := range staff {
		d.AddUser(email, accounts.RoleApprover)
		browsers[i] = d.Login(email)
	}
	var all []string
	for i := range 12 {
		all = append(all, d.SubmitEmail(fmt.Sprintf("bulk-race%d", i), "Hello", "Body").ID)
	}
	selections := [][]string{all[:8], all[4:]}
	pages := apptest.RunConcurrently(2, func(i int) page {
		return browsers[i].Post("/actions/bulk", url.Values{"ids": selections[i], "decision": {"approve"}})
	})
	says := map[string][]string{}
	for i, p := range pages {
		p.WantStatus(t, http.StatusOK)
		rows := bulkRows(t, p.Body)
		if len(rows) != len(selections[i]) {
			t.Fatalf("%s: %d rows for %d ids", staff[i], len(rows), len(selections[i]))
		}
		for _, r := range rows {
			switch {
			case r.text == "decided":
				says[r.id] = append(says[r.id], staff[i])
			case strings.HasPrefix(r.text, "already decided by "):
				says[r.id] = append(says[r.id], strings.TrimPrefix(r.text, "already decided by "))
			default:
				t.Fatalf("%s: %s is %q", staff[i], r.id, r.text)
			}
		}
	}
	for _, id := range all {
		got := d.Action(id)
		for _, who := range says[id] {
			if got.DecidedBy == nil || "user:"+who != *got.DecidedBy {
				t.Fatalf("%s: an answer says %s decided it, the store says %v", id, who, got.DecidedBy)
			}
		}
		if n := d.EventCount(id, queue.EventApproved); n != 1 {
			t.Fatalf("%s has %d approved events", id, n)
		}
	}
}
