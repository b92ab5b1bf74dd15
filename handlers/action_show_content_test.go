package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestActionPageContentBeforeDecision (issue 44, points 1-3): on the page of
// a pending action what is being approved (the preview, or the payload when
// the tool has none) comes before the first decision button; characters a
// Python agent sent as \u escapes read as characters, invisible ones are
// still marked and the edit box shows them as escapes; an edited approval's
// title and preview are the edit's.
func TestActionPageContentBeforeDecision(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)

	// Python's json.dumps writes ASCII only.
	german := d.Submit("send_customer_email", `{"customer_id":"de1","topic":"t","to":"c@example.com","subject":"Gr\u00fc\u00dfe aus K\u00f6ln","body":"Viele Gr\u00fc\u00dfe \u2014 Jens"}`, "")
	deploy := d.Submit("deploy_service", `{"service":"billing","note":"\u65e5\u672c\u8a9e \u2014 ok","hidden":"a\u202eb"}`, "deploy:billing:1")
	if !strings.Contains(strings.Join(deploy.Warnings, " "), "tool_not_registered") {
		t.Fatalf("deploy_service is registered? warnings %v", deploy.Warnings)
	}

	for _, tc := range []struct {
		name, id string
		want     []string // in the content, as characters
	}{
		{"a tool with a preview", german.ID, []string{"Grüße aus Köln", "Viele Grüße — Jens"}},
		{"an unregistered tool: the payload is the content", deploy.ID, []string{"日本語 — ok", "[U+202E]"}},
	} {
		res := ann.Get("/actions/" + tc.id)
		res.WantStatus(t, http.StatusOK)
		content := strings.Index(res.Body, `data-testid="content"`)
		button := strings.Index(res.Body, `<button type="submit" class="btn btn-approve"`)
		if content < 0 || button < 0 || content > button {
			t.Fatalf("%s: content at %d, the first decision button at %d:\n%s", tc.name, content, button, apptest.TruncateBody(res.Body))
		}
		head := res.Body[content:button]
		for _, w := range tc.want {
			if !strings.Contains(head, w) {
				t.Errorf("%s: %q is not shown before the decision:\n%s", tc.name, w, head)
			}
		}
		if strings.Contains(res.Body, `\u00fc`) || strings.Contains(res.Body, `\u65e5`) || strings.Contains(res.Body, `\u2014`) {
			t.Errorf("%s: the page still shows \\u escapes", tc.name)
		}
		if strings.Contains(res.Body, "read the payload below") {
			t.Errorf("%s: the page points below for what it should show first", tc.name)
		}
	}
	// The edit box: characters, and the invisible one as an escape.
	res := ann.Get("/actions/" + deploy.ID)
	box := res.Body[strings.Index(res.Body, `id="approve-payload"`):]
	box = box[:strings.Index(box, "</textarea>")]
	if !strings.Contains(box, `日本語`) || !strings.Contains(box, `a\u202eb`) || strings.ContainsRune(box, '\u202e') {
		t.Errorf("the edit box: %s", box)
	}
	// Approving the box unchanged is no edit.
	form := url.Values{"payload": {htmlUnescape(box[strings.Index(box, ">")+1:])}}
	ann.Post("/actions/"+deploy.ID+"/approve", form).WantRedirect(t, "/actions/"+deploy.ID)
	if a := d.Action(deploy.ID); a.State != queue.StateApproved || len(a.EditedFields()) != 0 {
		t.Fatalf("approving the unchanged box: %s, edited %v", a.State, a.EditedFields())
	}

	// Edit before approve: the title and preview are the edit's.
	edited := d.SubmitEmail("ed1", "Your refund", "Hi Dana")
	ann.Post("/actions/"+edited.ID+"/approve", url.Values{"payload": {`{"customer_id":"ed1","topic":"t","to":"c@example.com","subject":"Your refund of 12 EUR is on its way","body":"Hi Dana"}`}}).
		WantRedirect(t, "/actions/"+edited.ID)
	res = ann.Get("/actions/" + edited.ID)
	res.WantContains(t, "<title>Your refund of 12 EUR is on its way", `data-testid="preview-edited"`, `<h2 id="diff-heading">`)
	h1 := res.Body[strings.Index(res.Body, "<h1>"):]
	h1 = h1[:strings.Index(h1, "</h1>")]
	if !strings.Contains(h1, "Your refund of 12 EUR is on its way") {
		t.Errorf("the title is not the edit's: %s", h1)
	}
	if strings.Index(res.Body, `data-testid="approved-payload"`) > strings.Index(res.Body, `data-testid="payload"`) {
		t.Errorf("the submitted payload comes before the approved one")
	}
}

// htmlUnescape undoes templ's escaping of a text box's content.
func htmlUnescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&quot;", `"`, "&amp;", "&", "&lt;", "<", "&gt;", ">", "&#39;", "'").Replace(s)
}

// TestHeldForShown: an approve rule's match over invisible characters goes
// to a person, and the page says why before the decision; a failed rule's
// warning says evaluation stopped there.
func TestHeldForShown(t *testing.T) {
	t.Parallel()
	tools := apptest.ParseTools(t, `
tools:
  mail:
    intent: "mail:{id}"
    approval:
      policy:
        - { name: amount-check, when: 'payload.amount > 5', decide: human }
        - { name: everything-else, when: 'true', decide: approve }
`, classify.Options{})
	d := apptest.StartDashboard(t, apptest.Options{Tools: tools})
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)
	held := d.Submit("mail", `{"id":"h1","amount":1,"text":"pay \u202eevil"}`, "")
	failed := d.Submit("mail", `{"id":"h2","text":"no amount"}`, "")
	if held.State != queue.StatePending || failed.State != queue.StatePending {
		t.Fatalf("states %s, %s", held.State, failed.State)
	}
	res := ann.Get("/actions/" + held.ID)
	res.WantContains(t, `data-testid="held-for"`, "no rule or grant approves an action with invisible characters that no person has seen")
	if strings.Index(res.Body, `data-testid="held-for"`) > strings.Index(res.Body, `id="approve-form"`) {
		t.Errorf("why a person decides comes after the decision forms")
	}
	res = ann.Get("/actions/" + failed.ID)
	res.WantContains(t, `data-testid="warnings"`, "policy rule amount-check failed",
		"Evaluation stopped at that rule: no later rule, grant or claim decides this action; a person decides.")
	if strings.Index(res.Body, `data-testid="warnings"`) > strings.Index(res.Body, `id="approve-form"`) {
		t.Errorf("the warnings' explanation comes after the decision forms")
	}
}

// TestTicketsAnOperatorCanSettle (issue 44, point 5): open tickets come
// first; each card shows the payload, the claim's age and what its kind
// means; a conflict says which report contradicted which finding, and a
// newer attempt is named; the action page links to its ticket.
func TestTicketsAnOperatorCanSettle(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ctx := context.Background()
	oscar := d.SignIn("oscar@example.com", accounts.RoleOps)
	settled, ticket := d.StaleTicket("o-settled")
	oscar.Post("/tickets/"+ticket.ID+"/resolve", url.Values{"outcome": {"failed"}, "note": {"No refund in the ledger"}}).WantStatus(t, http.StatusSeeOther)
	// A newer attempt of the settled intent (taken before the conflict
	// below opens: an open conflict holds the intent).
	newer := d.Submit("issue_refund", `{"order_id":"o-settled","line_id":1,"amount":5,"currency":"EUR"}`, "")
	if newer.Attempt < 2 {
		t.Fatalf("newer attempt %d", newer.Attempt)
	}
	// The agent's late report contradicts the operator's finding.
	if _, err := d.Service.Complete(ctx, settled.ID, "bot", []byte(`{"refund_id":"re_9"}`), "api"); queue.ErrorCode(err) != queue.CodeOutcomeConflict {
		t.Fatalf("late complete: %v", err)
	}
	open, _ := d.StaleTicket("o-open")
	d.Advance(2 * time.Minute)

	res := oscar.Get("/tickets?state=all")
	res.WantStatus(t, http.StatusOK)
	body := res.Body
	firstOpen := strings.Index(body, `<span class="badge">open</span>`)
	firstResolved := strings.Index(body, `<span class="badge">resolved</span>`)
	if firstOpen < 0 || firstResolved < 0 || firstOpen > firstResolved {
		t.Fatalf("open at %d, resolved at %d: open tickets must come first", firstOpen, firstResolved)
	}
	res.WantContains(t, `data-testid="ticket-payload"`, "o-open", `data-testid="claim-age"`, "Stale: the action was claimed and no outcome came back",
		`data-testid="conflict"`, "reported <strong>complete</strong>", "already <strong>failed</strong>", "No refund in the ledger", "re_9")
	// The card of the open ticket shows its payload, open.
	card := body[strings.Index(body, open.ID):]
	if !strings.Contains(card[:strings.Index(card, "</section>")], `<details open>`) {
		t.Errorf("the open ticket's payload is folded")
	}

	oscar.Get("/tickets?state=all").WantContains(t, `data-testid="newer-attempt"`, "/actions/"+newer.ID)

	page := oscar.Get("/actions/" + open.ID)
	tickets, err := d.Store.TicketList(ctx, queue.TicketListParams{ActionID: open.ID})
	if err != nil || len(tickets) != 1 {
		t.Fatal(err)
	}
	page.WantContains(t, `href="/tickets?state=open#ticket-`+tickets[0].ID+`"`)
}

// TestAuditNamesActions (issue 44, point 6): the audit log names an action
// by its tool and preview title, not by a cut id.
func TestAuditNamesActions(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	vic := d.SignIn("vic@example.com", accounts.RoleViewer)
	a := d.SubmitEmail("au1", "Grüße from the audit", "B")
	vic.Get("/audit").WantContains(t, `data-testid="audit-action"`, "Grüße from the audit", `href="/actions/`+a.ID+`"`, "<code>send_customer_email</code>")
}

// TestEmptyQueueSaysHowToStart (issue 44, point 8).
func TestEmptyQueueSaysHowToStart(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	ann := d.SignIn("ann@example.com", accounts.RoleApprover)
	ann.Get("/").WantContains(t, `data-testid="start-hint"`, "POST /api/v1/actions")
	ann.Get("/tools").WantContains(t, "2m") // claim_timeout of issue_refund, not 2m0s
	if strings.Contains(ann.Get("/tools").Body, "m0s") {
		t.Errorf("a duration printed as Go's 5m0s")
	}
}
