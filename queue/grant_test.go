package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// TestPickGrant holds the one rule of which grant approves a submission,
// which both stores apply to the grants they read: active, matching, its
// granting user still standing; one without a limit first, then the one
// that expires soonest, then the lowest id. (storetest runs it through
// each store, with concurrent uses.)
func TestPickGrant(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	approver := queue.Granter{Exists: true, CanDecide: true, Email: "ann@example.com"}
	grant := func(id string, maxUses int, expiresIn time.Duration, change func(*queue.Grant)) queue.GrantCandidate {
		g := &queue.Grant{ID: id, Tool: "send_customer_email", GrantedBy: "user:ann@example.com", ExpiresAt: now.Add(expiresIn),
			MaxUses: maxUses, Fields: []queue.GrantField{{Path: "customer.id", Value: json.RawMessage(`7`)}}}
		if change != nil {
			change(g)
		}
		return queue.GrantCandidate{Grant: g, Granter: approver}
	}
	standing := func(c queue.GrantCandidate, g queue.Granter) queue.GrantCandidate {
		c.Granter = g
		return c
	}
	p := queue.GrantFindParams{Tool: "send_customer_email", RequestedBy: "agent:bot", Now: now,
		Payload: json.RawMessage(`{"customer":{"id":7.0},"body":"hi"}`)}
	for _, c := range []struct {
		name  string
		cands []queue.GrantCandidate
		want  string // "" for none
	}{
		{"none", nil, ""},
		{"without a limit before one with", []queue.GrantCandidate{grant("a", 5, time.Hour, nil), grant("b", 0, 2*time.Hour, nil)}, "b"},
		{"sooner expiry first", []queue.GrantCandidate{grant("a", 5, 2*time.Hour, nil), grant("b", 5, time.Hour, nil)}, "b"},
		{"then the lower id", []queue.GrantCandidate{grant("b", 0, time.Hour, nil), grant("a", 0, time.Hour, nil)}, "a"},
		{"used up", []queue.GrantCandidate{grant("a", 2, time.Hour, func(g *queue.Grant) { g.Uses = 2 }), grant("b", 2, 2*time.Hour, nil)}, "b"},
		{"expired", []queue.GrantCandidate{grant("a", 0, -time.Second, nil)}, ""},
		{"revoked", []queue.GrantCandidate{grant("a", 0, time.Hour, func(g *queue.Grant) { g.RevokedAt = &now })}, ""},
		{"another agent's", []queue.GrantCandidate{grant("a", 0, time.Hour, func(g *queue.Grant) { g.Agent = "agent:other" })}, ""},
		{"this agent's", []queue.GrantCandidate{grant("a", 0, time.Hour, func(g *queue.Grant) { g.Agent = "agent:bot" })}, "a"},
		{"another tool's", []queue.GrantCandidate{grant("a", 0, time.Hour, func(g *queue.Grant) { g.Tool = "post_publicly" })}, ""},
		{"a field with another value", []queue.GrantCandidate{grant("a", 0, time.Hour, func(g *queue.Grant) {
			g.Fields[0].Value = json.RawMessage(`8`)
		})}, ""},
		{"a missing field", []queue.GrantCandidate{grant("a", 0, time.Hour, func(g *queue.Grant) { g.Fields[0].Path = "customer.name" })}, ""},
		{"granter removed", []queue.GrantCandidate{standing(grant("a", 0, time.Hour, nil), queue.Granter{})}, ""},
		{"granter demoted, the next one stands", []queue.GrantCandidate{
			standing(grant("a", 0, time.Hour, nil), queue.Granter{Exists: true, Email: "ann@example.com"}), grant("b", 3, time.Hour, nil)}, "b"},
		{"granter refused by the identity provider", []queue.GrantCandidate{
			standing(grant("a", 0, time.Hour, nil), queue.Granter{Exists: true, CanDecide: true, NoAccess: true, Email: "ann@example.com"})}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := queue.PickGrant(c.cands, p)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if g != nil {
				got = g.ID
			}
			if got != c.want {
				t.Fatalf("picked %q, want %q", got, c.want)
			}
		})
	}

	t.Run("an approver the tool does not name", func(t *testing.T) {
		named := p
		named.Approval = &classify.Approval{Required: 1, Approvers: []string{"bob@example.com"}, ApproverEmails: []string{"bob@example.com"}}
		g, err := queue.PickGrant([]queue.GrantCandidate{grant("a", 0, time.Hour, nil)}, named)
		if err != nil || g != nil {
			t.Fatalf("picked %v (%v), want none: ann may no longer decide the tool", g, err)
		}
	})
	t.Run("a payload that is not an object", func(t *testing.T) {
		bad := p
		bad.Payload = json.RawMessage(`[1]`)
		if _, err := queue.PickGrant([]queue.GrantCandidate{grant("a", 0, time.Hour, nil)}, bad); err == nil {
			t.Fatal("no error for a payload that is not an object")
		}
	})
}
