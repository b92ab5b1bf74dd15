package handlers_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// chainFacts are the texts of the audit page's chain card.
func chainFacts(t *testing.T, p page) map[string]string {
	t.Helper()
	facts := map[string]string{}
	for _, id := range []string{"chain-seq", "chain-unsealed", "chain-verified"} {
		m := regexp.MustCompile(`(?s)data-testid="` + id + `">(.*?)</dd>`).FindStringSubmatch(p.Body)
		if m == nil {
			t.Fatalf("no %s on the audit page:\n%s", id, apptest.TruncateBody(p.Body))
		}
		facts[id] = strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], " ")), " ")
	}
	return facts
}

// TestAuditPageShowsTheChain: /audit shows how far the chain is sealed,
// what waits, who seals and the last verification, and /metrics the
// backlog, on both stores.
func TestAuditPageShowsTheChain(t *testing.T) {
	t.Parallel()
	for _, sqlite := range []bool{false, true} {
		t.Run(map[bool]string{false: "postgres", true: "sqlite"}[sqlite], func(t *testing.T) {
			t.Parallel()
			d := apptest.StartDashboard(t, apptest.Options{SQLite: sqlite})
			b := d.SignIn("ann@example.com", accounts.RoleViewer) // a signed_in event
			d.SubmitEmail("c-1", "Hello", "Hi")                   // a submitted event

			f := chainFacts(t, b.Get("/audit"))
			if f["chain-seq"] != "No event sealed yet" || f["chain-unsealed"] != "2 events waiting to be sealed No process holds the sealer's lease." ||
				!strings.HasPrefix(f["chain-verified"], "Never.") {
				t.Fatalf("before sealing: %q", f)
			}
			if got := d.Metric(t, "approvals_audit_unsealed"); got != 2 {
				t.Fatalf("approvals_audit_unsealed %v before sealing, want 2", got)
			}

			if _, err := d.Sealer.Seal(t.Context()); err != nil {
				t.Fatal(err)
			}
			apptest.SealAll(t, d.Store)
			head, err := d.Store.AuditHeadGet(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			p := b.Get("/audit")
			f = chainFacts(t, p)
			if !strings.HasPrefix(f["chain-seq"], "Up to seq 2 (last sealed ") || !strings.HasSuffix(f["chain-seq"], head.Hash.String()) ||
				!strings.HasPrefix(f["chain-unsealed"], "0 events waiting to be sealed Sealed by ") {
				t.Fatalf("after sealing: %q", f)
			}
			if got := d.Metric(t, "approvals_audit_unsealed"); got != 0 {
				t.Fatalf("approvals_audit_unsealed %v after sealing, want 0", got)
			}
			// The staff event is listed with its subject where an action's
			// events link their action.
			p.WantContains(t, "<code>user:ann@example.com</code>", "Signed in")
			b.Get("/audit?kind=signed_in").WantContains(t, "user:ann@example.com")
			if strings.Contains(b.Get("/audit?kind=submitted").Body, "<code>user:ann@example.com</code>") {
				t.Fatal("the kind filter lists the login among submissions")
			}

			at := time.Date(2031, 3, 14, 9, 30, 0, 0, time.UTC)
			if err := d.Store.AuditVerificationSave(t.Context(), audit.Verification{At: at, Seq: 2, OK: true}); err != nil {
				t.Fatal(err)
			}
			if f := chainFacts(t, b.Get("/audit")); !strings.HasPrefix(f["chain-verified"], "intact up to seq 2, ") {
				t.Fatalf("after a verification: %q", f)
			}
			if err := d.Store.AuditVerificationSave(t.Context(), audit.Verification{At: at, Seq: 1, Detail: "seq 2: changed: <b>x</b>"}); err != nil {
				t.Fatal(err)
			}
			p = b.Get("/audit")
			if f := chainFacts(t, p); !strings.HasPrefix(f["chain-verified"], "broken ") || !strings.HasSuffix(f["chain-verified"], "seq 2: changed: &lt;b&gt;x&lt;/b&gt;") {
				t.Fatalf("after a failed verification: %q", f)
			}
		})
	}
}

// TestDashboardRecordsStaffEvents: each sign-in, refused sign-in,
// sign-out and change of a user or token on the dashboard leaves one staff
// event, by whom, about whom, with what changed.
func TestDashboardRecordsStaffEvents(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	d.AddUser("root@example.com", accounts.RoleAdmin)
	if _, err := d.TryLogin("root@example.com", "wrong password"); err == nil {
		t.Fatal("a wrong password signed in")
	}
	if _, err := d.TryLogin("nobody@example.com", "wrong password"); err == nil {
		t.Fatal("an unknown user signed in")
	}
	b := d.Login("root@example.com")
	b.Post("/admin/users", url.Values{"email": {"bob@example.com"}, "role": {"viewer"}, "password": {"long enough password"}}).WantRedirect(t, "/admin/users?done=created")
	bob, err := d.Store.UserGetByEmail(t.Context(), "bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	path := "/admin/users/" + strconv.FormatInt(bob.ID, 10)
	b.Post(path+"/role", url.Values{"role": {"approver"}}).WantRedirect(t, "/admin/users?done=role")
	b.Post(path+"/password", url.Values{"password": {"another long password"}}).WantRedirect(t, "/admin/users?done=password")
	b.Post(path+"/slack", url.Values{"slack_id": {"U0123ABCD"}}).WantRedirect(t, "/admin/users?done=slack")
	b.Post(path+"/remove", nil).WantRedirect(t, "/admin/users?done=removed")
	b.Post("/admin/tokens", url.Values{"name": {"billing"}}).WantStatus(t, http.StatusOK)
	b.Post("/admin/tokens/revoke", url.Values{"name": {"billing"}}).WantRedirect(t, "/admin/tokens?done=revoked")
	b.Post("/logout", nil).WantRedirect(t, "/login")

	evs, err := d.Store.EventList(t.Context(), queue.EventListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		if ev.ActionID != "" {
			t.Errorf("event %+v: want a staff event", ev)
		}
		data := regexp.MustCompile(`"address":"[^"]*"`).ReplaceAllString(string(ev.Data), `"address":…`)
		got = append(got, strings.Join([]string{ev.Kind, ev.Actor, ev.Subject, ev.Channel, data}, " "))
	}
	want := []string{
		`sign_in_refused anonymous user:root@example.com password {"address":…,"reason":"bad_credentials"}`,
		`sign_in_refused anonymous user:nobody@example.com password {"address":…,"reason":"bad_credentials"}`,
		`signed_in user:root@example.com user:root@example.com password {"address":…}`,
		`user_added user:root@example.com user:bob@example.com dashboard {"role":"viewer"}`,
		`role_changed user:root@example.com user:bob@example.com dashboard {"from":"viewer","to":"approver"}`,
		`password_changed user:root@example.com user:bob@example.com dashboard `,
		`slack_id_changed user:root@example.com user:bob@example.com dashboard {"from":"","to":"U0123ABCD"}`,
		`user_removed user:root@example.com user:bob@example.com dashboard {"role":"approver"}`,
		`token_created user:root@example.com token:billing dashboard `,
		`token_revoked user:root@example.com token:billing dashboard `,
		`signed_out user:root@example.com user:root@example.com dashboard `,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("staff events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(string(evs[len(evs)-3].Data), `"address":"127.0.0.1"`) {
		t.Fatalf("the sign-in's client address: %s", evs[len(evs)-3].Data)
	}
	// Every one of them is sealed like an action's event.
	apptest.SealAll(t, d.Store)
	rep, err := audit.VerifyStore(t.Context(), d.Store)
	if err != nil || rep.Problem != nil || rep.Last.Seq != int64(len(want)) {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}

// TestSetupRecordsTheFirstAdmin: the admin made through the one-time link
// is recorded by themself, on the setup channel.
func TestSetupRecordsTheFirstAdmin(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	link, err := d.Server.SetupURL(t.Context(), d.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimPrefix(link, d.URL+"/setup?token=")
	b := d.Anonymous()
	b.Get("/setup?token="+token).WantStatus(t, http.StatusOK)
	b.Post("/setup", url.Values{"token": {token}, "email": {"first@example.com"}, "password": {"long enough password"}}).WantRedirect(t, "/")
	evs, err := d.Store.EventList(t.Context(), queue.EventListParams{Kind: queue.EventUserAdded, Limit: 10})
	if err != nil || len(evs) != 1 {
		t.Fatalf("user_added events: %+v, %v", evs, err)
	}
	if ev := evs[0]; ev.Actor != "user:first@example.com" || ev.Subject != "user:first@example.com" || ev.Channel != "setup" ||
		string(ev.Data) != `{"role":"admin"}` {
		t.Fatalf("the first admin's event: %+v", ev)
	}
}
