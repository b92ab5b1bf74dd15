package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
)

// Grant is an approver's "this, and the next ones like it": until ExpiresAt
// (and for at most MaxUses actions, when set), a submission of Tool that no
// policy rule decided, by Agent (any agent when empty), whose payload has
// the values of Fields, is approved at once.
type Grant struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Agent is the requested_by (agent:NAME) the grant is limited to; ""
	// for any agent.
	Agent string `json:"agent"`
	// Fields are the payload fields whose values a submission must repeat;
	// none: any payload of the tool.
	Fields    []GrantField `json:"fields"`
	GrantedBy string       `json:"granted_by"` // user:EMAIL
	// ActionID is the action whose approval created the grant; it is not
	// one of its uses.
	ActionID  string    `json:"action_id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// MaxUses is the most actions it approves (0: no limit); Uses how many
	// it has approved.
	MaxUses   int        `json:"max_uses"`
	Uses      int        `json:"uses"`
	RevokedAt *time.Time `json:"revoked_at"`
	RevokedBy *string    `json:"revoked_by"`
	// EndReason says why a revoked grant ended (GrantEnd…): a person
	// revoked it, or its granting user lost the right to decide; "" while
	// it is not revoked.
	EndReason string `json:"end_reason,omitempty"`
}

// Why a grant ended before its time: the stored end_reason, and (for
// GrantEndNotApprover, never stored) what /grants says of a grant whose
// granter the tools file now in force no longer lists among the tool's
// approvers, which the submission's check refuses to use.
const (
	// GrantEndRevoked: its granter, an operator or an admin revoked it.
	GrantEndRevoked = "revoked"
	// GrantEndGranterRemoved: its granting user was removed.
	GrantEndGranterRemoved = "granter_removed"
	// GrantEndGranterDemoted: its granting user's role no longer decides
	// (neither approver nor admin), set by an admin or by the identity
	// provider's groups at a sign-in.
	GrantEndGranterDemoted = "granter_demoted"
	// GrantEndGranterRefused: the identity provider refused its granting
	// user (their groups map to no role).
	GrantEndGranterRefused = "granter_refused"
	// GrantEndNotApprover: its granting user is not among the approvers
	// of the tool in the tools file now in force.
	GrantEndNotApprover = "granter_not_approver"
)

// GrantSystemActor revokes the grants whose granter lost the right to
// decide, in the transaction that took it away.
const GrantSystemActor = SystemActor

// DefaultGrantUses is the use limit of "Approve and allow similar" when
// the approver names none (or the tool's grants.max_uses when smaller): a
// grant never approves without end by default.
const DefaultGrantUses = 20

// Granter is what the stores know, at a submission, of the user who
// created a grant: the rule of GranterStanding reads it.
type Granter struct {
	// Exists says a staff user has the grant's email.
	Exists bool
	// CanDecide says their role approves and rejects (approver, admin).
	CanDecide bool
	// NoAccess says the identity provider refused them at their last
	// sign-in attempt.
	NoAccess bool
	// Email and IdPGroups are matched against the tool's approvers.
	Email     string
	IdPGroups []string
}

// GranterStanding is the one rule of whether a grant may still approve for
// its granting user: "" when they may still decide an action of the tool
// under approval (the tool's approval rule now in force, as the new
// action's snapshot holds it), else why not (GrantEnd…). A grant is an
// approver's decision made in advance, so it lasts only as long as their
// right to make it: PickGrant checks it at every match, and the stores end
// the grants in the transaction that removes the user, lowers the role or
// records the identity provider's refusal.
func GranterStanding(approval *classify.Approval, g Granter) string {
	switch {
	case !g.Exists:
		return GrantEndGranterRemoved
	case !g.CanDecide:
		return GrantEndGranterDemoted
	case g.NoAccess:
		return GrantEndGranterRefused
	case !approval.MayDecide(classify.Person{Email: g.Email, IdPGroups: g.IdPGroups}, false):
		return GrantEndNotApprover
	}
	return ""
}

// GranterEmail is the email of the grant's granting user (granted_by
// user:EMAIL), "" for any other actor.
func (g *Grant) GranterEmail() string {
	email, ok := strings.CutPrefix(g.GrantedBy, "user:")
	if !ok {
		return ""
	}
	return email
}

// GrantField is one payload field a grant holds fixed: Path is dotted
// ("customer.id"), Value the granting action's value there, as JSON.
type GrantField struct {
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// Limits of a grant request.
const (
	// MaxGrantFields caps the fields one grant may hold fixed.
	MaxGrantFields = 20
	// MinGrantFor is the shortest grant: anything shorter is a typo.
	MinGrantFor = time.Minute
)

// Active reports whether the grant may approve an action at now.
func (g *Grant) Active(now time.Time) bool {
	return g.RevokedAt == nil && g.ExpiresAt.After(now) && (g.MaxUses == 0 || g.Uses < g.MaxUses)
}

// Matches reports whether the grant covers a submission of tool by
// requestedBy with payload: the same tool, its agent (if it names one), and
// every field's value equal as JSON (key order and number spelling do not
// matter; a missing field matches nothing). It does not look at time or
// uses (Active).
func (g *Grant) Matches(tool, requestedBy string, payload map[string]any) bool {
	if g.Tool != tool || g.Agent != "" && g.Agent != requestedBy {
		return false
	}
	for _, f := range g.Fields {
		v, ok := classify.LookupField(payload, f.Path)
		if !ok {
			return false
		}
		want, ok := decodeValue(f.Value)
		if !ok || !valueEqual(v, want) {
			return false
		}
	}
	return true
}

// StoredColumns are the grant's fields as the stores keep them: the fields
// as a JSON array ([] for none), and the agent and use limit, nil (NULL)
// for any agent and no limit.
func (g *Grant) StoredColumns() (fields string, agent, maxUses any) {
	fields = "[]"
	if len(g.Fields) > 0 {
		b, _ := json.Marshal(g.Fields) // paths and raw JSON values: cannot fail
		fields = string(b)
	}
	if g.Agent != "" {
		agent = g.Agent
	}
	if g.MaxUses > 0 {
		maxUses = g.MaxUses
	}
	return fields, agent, maxUses
}

// UsesLeft returns how many more actions the grant may approve, and false
// for a grant without a limit.
func (g *Grant) UsesLeft() (int, bool) {
	if g.MaxUses == 0 {
		return 0, false
	}
	return max(g.MaxUses-g.Uses, 0), true
}

// GrantRequest asks, with an approval, for a grant of the actions like the
// approved one (the dashboard's "Approve and allow similar").
type GrantRequest struct {
	// For is how long the grant lasts: at most the tool's grants.max.
	For time.Duration
	// Uses caps the actions it approves (0: DefaultGrantUses, or the
	// tool's max_uses when smaller).
	Uses int
	// AnyAgent extends it to every agent; else only the action's agent.
	AnyAgent bool
	// Fields are payload paths whose values later submissions must repeat.
	Fields []string
}

// GrantTry asks a store to approve a new pending action by an active grant
// that matches it, within the submission's transaction: the store reads
// the tool's active grants with their granting users, PickGrant chooses,
// the store locks a grant with a limit and counts its use by a
// conditional update, and writes what ApproveByGrant makes (the action
// approved by grant:ID, the approved event on channel grant). No grant
// matching, the action is stored pending as it was given.
type GrantTry struct {
	// Now is when grants must still be active.
	Now time.Time
	// ExpiresAt is the approval's expiry.
	ExpiresAt time.Time
	// ApprovedUnrouted says the approved event notifies no channel.
	ApprovedUnrouted bool
}

// GrantCandidate is a grant of the submitted tool, active when the store
// read it, with what GranterStanding needs of its granting user: what a
// store reads for PickGrant to judge.
type GrantCandidate struct {
	Grant   *Grant
	Granter Granter
}

// PickGrant is the one rule of which grant approves the submission p:
// among the candidates, one Active at p.Now, that Matches, and whose
// granting user may still decide the tool (GranterStanding); one without a
// limit first, then the one that expires soonest (a limited one is used up
// before it lapses), then the lowest id. nil when none does. The stores
// read the tool's active grants and lock what they must (GrantTry); they
// do not judge.
func PickGrant(cands []GrantCandidate, p GrantFindParams) (*Grant, error) {
	var (
		payload map[string]any
		best    *Grant
	)
	for _, c := range cands {
		g := c.Grant
		if !g.Active(p.Now) || GranterStanding(p.Approval, c.Granter) != "" || best != nil && !grantBefore(g, best) {
			continue
		}
		if payload == nil {
			var err error
			if payload, err = DecodeObject(p.Payload); err != nil {
				return nil, fmt.Errorf("grant lookup: payload: %w", err)
			}
		}
		if g.Matches(p.Tool, p.RequestedBy, payload) {
			best = g
		}
	}
	return best, nil
}

// grantBefore reports whether PickGrant prefers a to b.
func grantBefore(a, b *Grant) bool {
	if (a.MaxUses == 0) != (b.MaxUses == 0) {
		return a.MaxUses == 0
	}
	if !a.ExpiresAt.Equal(b.ExpiresAt) {
		return a.ExpiresAt.Before(b.ExpiresAt)
	}
	return a.ID < b.ID
}

// GrantApproved makes the pending action a the one grant g approves: the
// state, decided_by, note, approvals and expiry.
func GrantApproved(a *Action, g *Grant, try *GrantTry) {
	by, note := GrantActorPrefix+g.ID, GrantNote(g.ID, g.GrantedBy)
	now, exp := try.Now, try.ExpiresAt
	a.State, a.GrantID, a.DecidedBy, a.DecidedAt, a.DecisionNote = StateApproved, g.ID, &by, &now, &note
	a.ApprovedPayload, a.ExpiresAt = a.Payload, &exp
	a.Approvals = []Approval{GrantApproval(g.ID, g.GrantedBy, now)}
}

// ApproveByGrant is what a store writes when grant g approves the new
// pending action a of a submission (GrantTry): a as GrantApproved makes
// it, its submitted event notifying no one (it never waited), and the
// approved event it returns, written after the submitted one. The store
// counts the use of a grant with a limit only once the insert took the
// intent.
func ApproveByGrant(a *Action, submitted *Event, g *Grant, try *GrantTry) Event {
	GrantApproved(a, g, try)
	submitted.Unrouted = true
	return Event{ActionID: a.ID, Kind: EventApproved, Actor: GrantActorPrefix + g.ID, Channel: GrantChannel,
		At: try.Now, Data: GrantEventData(g.ID, g.GrantedBy), Unrouted: try.ApprovedUnrouted}
}

// GrantEventData is the data of the approved event of an action a grant
// approved.
func GrantEventData(grantID, grantedBy string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"grant": grantID, "granted_by": grantedBy})
	return b
}

// GrantApproval is the approval an action a grant approved carries.
func GrantApproval(grantID, grantedBy string, at time.Time) Approval {
	return Approval{By: grantedBy, At: at, Note: GrantNote(grantID, grantedBy), Channel: GrantChannel}
}

// grantFor builds the grant that approving a creates with r, checked
// against the tool's grant limits in the tools file now in force (a grant
// is about later submissions, which that file governs). A refusal is
// CodeInvalidRequest naming what is wrong, and nothing is decided.
func (s *Service) grantFor(a *Action, by string, r *GrantRequest, edited bool, now time.Time) (*Grant, error) {
	tool, registered := s.Registry().Lookup(a.Tool)
	if !registered || slices.Contains(a.Warnings, WarningToolNotRegistered) {
		return nil, Errorf(CodeInvalidRequest, "no grant: tool %s is not in the tools file, so a person decides each of its actions; approve it without one", a.Tool)
	}
	if risks := UnseenRisks(a.Warnings); len(risks) > 0 {
		return nil, Errorf(CodeInvalidRequest, "no grant: action %s carries the warning %s, and a grant would approve later actions no person saw; approve it without one",
			a.ID, strings.Join(risks, ", "))
	}
	limits, err := tool.GrantLimits()
	if err != nil {
		return nil, Errorf(CodeInvalidRequest, "no grant: %v; approve it without one", err)
	}
	switch {
	case a.ApprovalsRequired > 1:
		return nil, Errorf(CodeInvalidRequest, "no grant: action %s needs %d approvals, so no single approver may grant the ones like it", a.ID, a.ApprovalsRequired)
	case edited:
		return nil, Errorf(CodeInvalidRequest, "no grant with an edited payload: a grant approves later submissions as they are sent; approve the edit alone")
	case r.For < MinGrantFor:
		return nil, Errorf(CodeInvalidRequest, "grant_for must be at least %s", MinGrantFor)
	case r.For > limits.Max:
		return nil, Errorf(CodeInvalidRequest, "grant_for %s is longer than tool %s allows (grants.max %s)", r.For, a.Tool, limits.Max)
	case r.Uses < 0:
		return nil, Errorf(CodeInvalidRequest, "grant_uses must be at least 1")
	case limits.MaxUses > 0 && r.Uses > limits.MaxUses:
		return nil, Errorf(CodeInvalidRequest, "grant_uses %d is more than tool %s allows (grants.max_uses %d)", r.Uses, a.Tool, limits.MaxUses)
	case len(r.Fields) > MaxGrantFields:
		return nil, Errorf(CodeInvalidRequest, "grant_fields names %d fields; at most %d", len(r.Fields), MaxGrantFields)
	}
	payload, err := DecodeObject(a.Payload)
	if err != nil {
		return nil, fmt.Errorf("grant for %s: payload: %w", a.ID, err)
	}
	g := &Grant{ID: NewID(now), Tool: a.Tool, GrantedBy: by, ActionID: a.ID, CreatedAt: now,
		ExpiresAt: now.Add(r.For), MaxUses: r.Uses, Fields: []GrantField{}}
	if g.MaxUses == 0 {
		g.MaxUses = DefaultGrantUses
		if limits.MaxUses > 0 {
			g.MaxUses = min(limits.MaxUses, DefaultGrantUses)
		}
	}
	if !r.AnyAgent {
		g.Agent = a.RequestedBy
	}
	fields := slices.Clone(r.Fields)
	slices.Sort(fields)
	for _, path := range slices.Compact(fields) {
		path = strings.TrimSpace(path)
		if path == "" {
			continue
		}
		for _, seg := range strings.Split(path, ".") {
			if seg == "" || strings.Trim(seg, "0123456789") == "" {
				// A grant compares fields of objects; a number would step
				// into an array, which the stores read differently.
				return nil, Errorf(CodeInvalidRequest, "grant_fields: %q is not a path of object fields (a.b.c, no array indexes)", path)
			}
		}
		v, ok := classify.LookupField(payload, path)
		if !ok {
			return nil, Errorf(CodeInvalidRequest, "grant_fields: the payload of action %s has no field %q", a.ID, path)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("grant for %s: field %s: %w", a.ID, path, err)
		}
		g.Fields = append(g.Fields, GrantField{Path: path, Value: raw})
	}
	return g, nil
}

// GrantRevokeParams revoke one grant.
type GrantRevokeParams struct {
	ID  string
	By  string // user:EMAIL
	Now time.Time
	// Event is recorded on the grant's action (kind grant_revoked).
	Event Event
}

// GrantListParams filter the grants: newest first, at most Limit.
type GrantListParams struct {
	// Active, when set, lists only the grants active at Now (true) or only
	// the others (false).
	Active *bool
	Now    time.Time
	Limit  int
}

// GrantFindParams describe a submission a grant could approve: the dry
// run's question, read without writing.
type GrantFindParams struct {
	Tool        string
	RequestedBy string
	Payload     json.RawMessage
	Now         time.Time
	// Approval is the tool's approval rule now in force (the new action's
	// snapshot): a grant whose granter it does not admit is not used
	// (GranterStanding).
	Approval *classify.Approval
}

// RevokeGrant revokes a grant at once: no submission after this commits is
// approved by it. Only its granting user may, unless mayRevokeAny (ops and
// admins). A grant revoked already is CodeAlreadyDecided.
func (s *Service) RevokeGrant(ctx context.Context, id, by string, mayRevokeAny bool) (*Grant, error) {
	g, err := s.store.GrantGetByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if !mayRevokeAny && g.GrantedBy != by {
		return nil, Errorf(CodeForbidden, "grant %s was created by %s; only they, operators and admins revoke it", g.ID, strings.TrimPrefix(g.GrantedBy, "user:"))
	}
	now := s.Now()
	data, _ := json.Marshal(map[string]string{"grant": g.ID})
	got, err := s.store.GrantRevoke(ctx, GrantRevokeParams{ID: id, By: by, Now: now,
		Event: Event{ActionID: g.ActionID, Kind: EventGrantRevoked, Actor: by, Channel: "dashboard", At: now, Data: data}})
	if errors.Is(err, ErrStateMismatch) {
		return got, &Error{Code: CodeAlreadyDecided, Detail: fmt.Sprintf("grant %s was revoked already, by %s at %s", id, deref(got.RevokedBy), fmtTime(got.RevokedAt))}
	}
	return got, err
}

func deref(s *string) string {
	if s == nil {
		return "someone"
	}
	return *s
}
