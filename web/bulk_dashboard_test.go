package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/approvals/approvals/accounts"
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
	d := startDashboard(t)
	d.addUser("ann@example.com", accounts.RoleApprover)
	ann := d.login("ann@example.com")

	t.Run("roles", func(t *testing.T) {
		t.Parallel()
		for i, role := range []accounts.Role{accounts.RoleAdmin, accounts.RoleApprover, accounts.RoleOps, accounts.RoleViewer} {
			email := fmt.Sprintf("bulk-role%d@example.com", i)
			d.addUser(email, role)
			b := d.login(email)
			a := d.submitEmail(fmt.Sprintf("bulk-role%d", i), "Hello", "Body")
			res := b.post("/actions/bulk", url.Values{"ids": {a.ID}, "decision": {"approve"}})
			queuePage := b.get("/")
			if role.CanDecide() {
				res.wantStatus(t, http.StatusOK)
				queuePage.wantContains(t, `data-testid="bulk-bar"`)
				continue
			}
			res.wantStatus(t, http.StatusForbidden)
			if strings.Contains(queuePage.body, `data-testid="bulk-bar"`) {
				t.Errorf("%s sees the bulk form", role)
			}
			if got := d.action(a.ID); got.State != queue.StatePending {
				t.Errorf("%s bulk-approved %s", role, a.ID)
			}
		}
	})

	t.Run("outcomes", func(t *testing.T) {
		t.Parallel()
		a := d.submitEmail("bulk-o1", "First <b>subject</b>", "Body")
		b := d.submitEmail("bulk-o2", "Second", "Body")
		taken := d.submitEmail("bulk-o3", "Third", "Body")
		if _, err := d.svc.Decide(t.Context(), queue.DecideRequest{To: queue.StateApproved, ID: taken.ID, By: "user:bob@example.com"}); err != nil {
			t.Fatal(err)
		}
		unknown := queue.NewID(d.Now())
		res := ann.post("/actions/bulk", url.Values{"ids": {a.ID, b.ID, a.ID, taken.ID, unknown}, "decision": {"approve"}, "note": {"all fine"}})
		res.wantStatus(t, http.StatusOK)
		want := []bulkRow{
			{a.ID, "decided", "decided", "Your order: First <b>subject</b>"},
			{b.ID, "decided", "decided", ""},
			{taken.ID, "already decided", "already decided by bob@example.com", ""},
			{unknown, "not pending", "not pending", ""},
		}
		got := bulkRows(t, res.body)
		if len(got) != len(want) {
			t.Fatalf("%d rows, want %d:\n%s", len(got), len(want), truncateBody(res.body))
		}
		for i, w := range want {
			g := got[i]
			if g.id != w.id || g.outcome != w.outcome || g.text != w.text || w.title != "" && !strings.Contains(g.title, "First <b>subject</b>") {
				t.Errorf("row %d: %+v, want %+v", i, g, w)
			}
		}
		// The unknown id's row says why it is "not pending"; a title with
		// markup is text.
		res.wantContains(t, "no such action", "First &lt;b&gt;subject&lt;/b&gt;")
		if got := d.action(a.ID); got.State != queue.StateApproved || *got.DecisionNote != "all fine" {
			t.Errorf("%s is %s", a.ID, got.State)
		}
		// htmx gets the list alone.
		c := d.submitEmail("bulk-o4", "Fourth", "Body")
		frag := ann.post("/actions/bulk", url.Values{"ids": {c.ID}, "decision": {"reject"}, "note": {"no"}}, "HX-Request", "true")
		frag.wantStatus(t, http.StatusOK)
		if strings.Contains(frag.body, "<html") || len(bulkRows(t, frag.body)) != 1 {
			t.Errorf("htmx answer:\n%s", truncateBody(frag.body))
		}
	})

	t.Run("reject without a note re-shows the form", func(t *testing.T) {
		t.Parallel()
		a := d.submitEmail("bulk-n1", "Hello", "Body")
		res := ann.post("/actions/bulk", url.Values{"ids": {a.ID}, "decision": {"reject"}, "note": {"  "}})
		res.wantStatus(t, http.StatusUnprocessableEntity)
		res.wantContains(t, "a note is required to reject", `id="bulk-form"`)
		doc, err := html.Parse(strings.NewReader(res.body))
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
		if got := d.action(a.ID); got.State != queue.StatePending {
			t.Errorf("a refused bulk rejection moved %s to %s", a.ID, got.State)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		t.Parallel()
		a := d.submitEmail("bulk-b1", "Hello", "Body")
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
			res := ann.post("/actions/bulk", tc.form)
			if res.status != tc.status {
				t.Errorf("%s: status %d, want %d", tc.name, res.status, tc.status)
			}
		}
		if got := d.action(a.ID); got.State != queue.StatePending {
			t.Errorf("a refused bulk request moved %s to %s", a.ID, got.State)
		}
	})
}

// TestDashboardBulkRace: two approvers submit overlapping selections at
// the same moment; each action is decided once and the two answers agree
// on who decided which.
func TestDashboardBulkRace(t *testing.T) {
	t.Parallel()
	d := startDashboard(t)
	staff := []string{"ann@example.com", "bob@example.com"}
	browsers := make([]*browser, 2)
	for i, email := range staff {
		d.addUser(email, accounts.RoleApprover)
		browsers[i] = d.login(email)
	}
	var all []string
	for i := range 12 {
		all = append(all, d.submitEmail(fmt.Sprintf("bulk-race%d", i), "Hello", "Body").ID)
	}
	selections := [][]string{all[:8], all[4:]}
	pages := runConcurrently(2, func(i int) page {
		return browsers[i].post("/actions/bulk", url.Values{"ids": selections[i], "decision": {"approve"}})
	})
	says := map[string][]string{}
	for i, p := range pages {
		p.wantStatus(t, http.StatusOK)
		rows := bulkRows(t, p.body)
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
		got := d.action(id)
		for _, who := range says[id] {
			if got.DecidedBy == nil || "user:"+who != *got.DecidedBy {
				t.Fatalf("%s: an answer says %s decided it, the store says %v", id, who, got.DecidedBy)
			}
		}
		if n := d.eventCount(id, queue.EventApproved); n != 1 {
			t.Fatalf("%s has %d approved events", id, n)
		}
	}
}
