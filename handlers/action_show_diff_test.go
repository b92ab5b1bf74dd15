package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
)

// TestDashboardShowsEditAsDiff: after an approver edits the subject, the
// action page shows that field old → new with the words removed and added,
// and a hostile edit stays text.
func TestDashboardShowsEditAsDiff(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)
	a := d.SubmitEmail("diff1", "Your order ships", "Body")
	edit := `{"customer_id":"diff1","topic":"t","to":"c@example.com","subject":"Your order <script>x()</script> ships today","body":"Body"}`
	ann.Post("/actions/"+a.ID+"/approve", url.Values{"payload": {edit}}).WantRedirect(t, "/actions/"+a.ID)

	res := ann.Get("/actions/" + a.ID)
	res.WantStatus(t, http.StatusOK)
	doc, err := html.Parse(strings.NewReader(res.Body))
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	var ins []string
	for n := range doc.Descendants() {
		if attr(n, "data-testid") == "diff-field" {
			fields = append(fields, attr(n, "data-pointer"))
		}
		if n.Type == html.ElementNode && n.Data == "ins" {
			ins = append(ins, strings.TrimPrefix(textOf(n), "added: "))
		}
		if n.Type == html.ElementNode && n.Data == "script" && n.FirstChild != nil {
			t.Fatalf("inline script on the page: %s", textOf(n))
		}
	}
	if strings.Join(fields, " ") != "/subject" {
		t.Fatalf("diff rows %q, want /subject:\n%s", fields, apptest.TruncateBody(res.Body))
	}
	if got := strings.Join(ins, "|"); got != "<script>x()</script>| today" {
		t.Fatalf("added words %q", got)
	}
}
