package templates

import (
	"strconv"
	"strings"
	"time"

	"github.com/approvals/approvals/queue"
)

// GrantsView is the grants page: active grants first, then past ones.
type GrantsView struct {
	Now          time.Time
	Active, Past []GrantRow
	CSRF         string
	Error        string
	Notice       string
}

// GrantRow is one grant, the actions it approved, and whether the viewer
// may revoke it.
type GrantRow struct {
	Grant     *queue.Grant
	Actions   []*queue.Action
	CanRevoke bool
	// Stopped, for an active grant, is why it approves nothing now
	// (queue.GranterStanding: its granter may not decide the tool under
	// the tools file now in force); "" when it approves.
	Stopped string
}

func grantAgent(g *queue.Grant) string {
	if g.Agent == "" {
		return "any agent"
	}
	return g.Agent
}

// grantScope lists the fields a grant holds fixed: `customer_id = "c-7"`.
func grantScope(g *queue.Grant) string {
	if len(g.Fields) == 0 {
		return "any payload"
	}
	parts := make([]string, len(g.Fields))
	for i, f := range g.Fields {
		parts[i] = f.Path + " = " + string(f.Value)
	}
	return strings.Join(parts, ", ")
}

// grantUses says how much of a grant is used: "2 of 3 (1 left)" or "4, no limit".
func grantUses(g *queue.Grant) string {
	if left, ok := g.UsesLeft(); ok {
		return strconv.Itoa(g.Uses) + " of " + strconv.Itoa(g.MaxUses) + " (" + strconv.Itoa(left) + " left)"
	}
	return strconv.Itoa(g.Uses) + ", no limit"
}

// grantEnd says why a past grant no longer approves anything.
func grantEnd(now time.Time, g *queue.Grant) string {
	switch {
	case g.RevokedAt != nil && g.EndReason != "" && g.EndReason != queue.GrantEndRevoked:
		return "ended at " + formatTimePtr(g.RevokedAt) + ": " + granterWords(g.EndReason)
	case g.RevokedAt != nil:
		return "revoked by " + str(g.RevokedBy) + " at " + formatTimePtr(g.RevokedAt)
	case !g.ExpiresAt.After(now):
		return "expired at " + FormatTime(g.ExpiresAt)
	}
	return "used up"
}

// granterWords says why a grant's granting user may no longer grant
// (queue.GrantEnd…).
func granterWords(reason string) string {
	switch reason {
	case queue.GrantEndGranterRemoved:
		return "its granting user was removed"
	case queue.GrantEndGranterDemoted:
		return "its granting user is no longer an approver"
	case queue.GrantEndGranterRefused:
		return "the identity provider refused its granting user"
	case queue.GrantEndNotApprover:
		return "its granting user is not among the tool's approvers in the tools file now in force"
	}
	return reason
}

func grantRevokeURL(id string) string { return "/grants/" + id + "/revoke" }
