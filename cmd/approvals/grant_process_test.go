package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
)

// grantRaceSubmissions and grantRaceUses are the race: twenty concurrent
// submissions of actions that one grant of three uses matches.
const (
	grantRaceSubmissions = 20
	grantRaceUses        = 3
)

// createRaceGrant approves the pending action with a grant of
// grantRaceUses uses that holds customer_id fixed, and returns it.
func createRaceGrant(t *testing.T, svc *queue.Service, st storage.Store, id string) *queue.Grant {
	t.Helper()
	// A grant approves while its granting user may decide: they exist.
	apptest.AddStaff(t, st, strings.TrimPrefix(apptest.Approver, "user:"), accounts.RoleApprover)
	if _, err := svc.Decide(context.Background(), queue.DecideRequest{ID: id, To: queue.StateApproved, By: apptest.Approver,
		Grant: &queue.GrantRequest{For: time.Hour, Uses: grantRaceUses, Fields: []string{"customer_id"}}}); err != nil {
		t.Fatal(err)
	}
	grants, err := st.GrantList(context.Background(), queue.GrantListParams{Limit: 10})
	if err != nil || len(grants) != 1 {
		t.Fatalf("grants: %v %v", grants, err)
	}
	return grants[0]
}

// countGrantApprovals checks every answer (201, approved by the grant or
// pending) and returns how many the grant approved.
func countGrantApprovals(t *testing.T, g *queue.Grant, answers []string) int {
	t.Helper()
	approved := 0
	for i, body := range answers {
		var a queue.Action
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatalf("submission %d: %s", i, body)
		}
		switch {
		case a.State == queue.StateApproved && apptest.Deref(a.DecidedBy) == queue.GrantActorPrefix+g.ID:
			approved++
		case a.State == queue.StatePending && a.DecidedBy == nil:
		default:
			t.Fatalf("submission %d: %s", i, body)
		}
	}
	return approved
}

func postSubmission(base, token string, i int) string {
	body, _ := json.Marshal(map[string]any{"tool": "send_customer_email", "payload": map[string]any{
		"customer_id": "c-race", "topic": fmt.Sprintf("topic-%d", i), "to": "x@customer.org", "subject": "s", "body": "b"}})
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/actions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated {
		return fmt.Sprintf("status %d: %s", res.StatusCode, b)
	}
	return string(b)
}

// TestGrantUsesAcrossTwoProcesses: twenty concurrent submissions through
// two `approvals serve` processes on one PostgreSQL database, against a
// grant of three uses: exactly three are approved by it, the rest wait
// for a person, and the grant counts three uses.
func TestGrantUsesAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
	bin := apptest.BuildBinary(t)
	d := apptest.NewDeployment(t, bin, apptest.DeploymentOptions{Tools: apptest.PolicyTools,
		DomainTools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})})
	procs := []*apptest.Process{d.Start(), d.Start()}
	first := d.Submit(procs[0], "send_customer_email", map[string]any{"customer_id": "c-race", "topic": "first", "to": "x@customer.org", "subject": "s", "body": "b"})
	g := createRaceGrant(t, d.Domain().Service, d.Domain().Store, first.ID)

	answers := apptest.RunConcurrently(grantRaceSubmissions, func(i int) string {
		return postSubmission(procs[i%2].URL, d.Token, i)
	})
	if n := countGrantApprovals(t, g, answers); n != grantRaceUses {
		t.Fatalf("%d of %d submissions approved by a grant of %d uses", n, grantRaceSubmissions, grantRaceUses)
	}
	stored, err := d.Domain().Store.GrantGetByID(context.Background(), g.ID)
	if err != nil || stored.Uses != grantRaceUses {
		t.Fatalf("the grant: %+v %v", stored, err)
	}
	list, err := d.Domain().Store.ActionList(context.Background(), queue.ActionListParams{GrantID: g.ID, Limit: 100})
	if err != nil || len(list) != grantRaceUses {
		t.Fatalf("actions approved by the grant: %d %v", len(list), err)
	}
}

// TestGrantUsesThroughSQLitesWriter: the same race through the one process
// SQLite serves, whose single writer orders the submissions.
func TestGrantUsesThroughSQLitesWriter(t *testing.T) {
	t.Parallel()
	e := apptest.StartAPI(t, apptest.Options{SQLite: true, Tools: apptest.ParseTools(t, apptest.PolicyTools, classify.Options{})})
	first := e.Do(e.URL, e.AgentToken, "POST", "/api/v1/actions", map[string]any{"tool": "send_customer_email", "payload": map[string]any{
		"customer_id": "c-race", "topic": "first", "to": "x@customer.org", "subject": "s", "body": "b"}}).Action(t)
	g := createRaceGrant(t, e.Service, e.Store, first.ID)
	answers := apptest.RunConcurrently(grantRaceSubmissions, func(i int) string { return postSubmission(e.URL, e.AgentToken, i) })
	if n := countGrantApprovals(t, g, answers); n != grantRaceUses {
		t.Fatalf("%d of %d submissions approved by a grant of %d uses", n, grantRaceSubmissions, grantRaceUses)
	}
	stored, err := e.Store.GrantGetByID(context.Background(), g.ID)
	if err != nil || stored.Uses != grantRaceUses {
		t.Fatalf("the grant: %+v %v", stored, err)
	}
}
