package handlers_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// TestDashboardConcurrentApprovals releases 20 approvers, each in their own
// session, on one action at once: exactly one decision and one approved
// event; the 19 others get 409.
func TestDashboardConcurrentApprovals(t *testing.T) {
	t.Parallel()
	d := apptest.StartDashboard(t, apptest.Options{})
	const n = 20
	browsers := make([]*apptest.Browser, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range n {
		email := fmt.Sprintf("approver%02d@example.com", i)
		d.AddUser(email, accounts.RoleApprover)
		wg.Go(func() { browsers[i], errs[i] = d.TryLogin(email, apptest.Password) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("20 sign-ins took %s", time.Since(began).Round(time.Millisecond))
	a := d.SubmitEmail("race", "Hello", "Body")

	start := make(chan struct{})
	statuses := make([]int, n)
	for i, b := range browsers {
		wg.Go(func() {
			form := url.Values{"note": {fmt.Sprintf("approver %d", i)}}
			<-start
			statuses[i] = b.Post("/actions/"+a.ID+"/approve", form).Status
		})
	}
	released := time.Now()
	close(start)
	wg.Wait()
	t.Logf("20 concurrent approvals answered in %s", time.Since(released).Round(time.Millisecond))

	count := map[int]int{}
	winner := -1
	for i, s := range statuses {
		count[s]++
		if s == http.StatusSeeOther {
			winner = i
		}
	}
	if count[http.StatusSeeOther] != 1 || count[http.StatusConflict] != n-1 {
		t.Fatalf("statuses %v, want one 303 and %d 409", count, n-1)
	}
	if got := d.EventCount(a.ID, queue.EventApproved); got != 1 {
		t.Fatalf("%d approved events, want 1", got)
	}
	got := d.Action(a.ID)
	if want := fmt.Sprintf("user:approver%02d@example.com", winner); got.State != queue.StateApproved || *got.DecidedBy != want {
		t.Fatalf("action %s decided by %v, want approved by %s", got.State, *got.DecidedBy, want)
	}
}
