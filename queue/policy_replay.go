package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
)

// Trying a policy on the past (approvals policy test): the stored
// submissions of a window go through the rules of a tools file, as their
// submission would have, and the report says what each rule would have
// decided and where the people who decided them disagree. It only reads.

// PolicyReplayParams say which submissions to replay through which rules.
type PolicyReplayParams struct {
	// Tools is the file whose rules are tried.
	Tools *classify.Registry
	// Since is the start of the window: actions created at or after it.
	Since time.Time
	// PageSize is how many actions one read takes (default 500).
	PageSize int
}

// PolicyReplay is what the rules would have done to the window's actions.
type PolicyReplay struct {
	// Actions counts the window's actions of tools with a policy.
	Actions int
	// Tools are those tools, sorted by name, each with every rule in order.
	Tools []ToolReplay
	// Disagreements are the actions a rule would have decided otherwise
	// than the person who did, oldest first.
	Disagreements []Disagreement
	// Plans are the window's plans, each judged as its proposal would be
	// under the file's rules.
	Plans PlansReplay
}

// PlansReplay counts the window's plans by what the file's rules would
// make of them: a person decides (some step is human), approved by the
// rules (no step needs a person), or rejected by a rule (some step is
// rejected), as Plans.Propose judges a proposal.
type PlansReplay struct {
	Total, Human, Approved, Rejected int
	// Each is every plan with its steps' routing, oldest first.
	Each []PlanReplay
}

// PlanReplay is one plan under the file's rules.
type PlanReplay struct {
	ID, Title string
	// Was is the plan's state as stored; Would what the rules make of it:
	// pending (a person decides), approved or rejected.
	Was, Would PlanState
	// Did is what the person who decided it did against the rules ("" when
	// no person decided it or they agree): rejected or asked for changes
	// what the rules approve; approved what they reject.
	Did   string
	By    string
	Steps []StepReplay
}

// StepReplay is how one step would be routed: its decision (StepDecision)
// and the rule that matched or failed.
type StepReplay struct {
	N              int
	Tool           string
	Decision, Rule string
}

// ToolReplay counts a tool's actions per rule.
type ToolReplay struct {
	Tool  string
	Rules []RuleReplay
	// None counts the actions no rule would have decided; Errors those for
	// which a rule could not be evaluated: evaluation stops there and a
	// person decides, so they count under no rule and not under None.
	// Held counts those an approve rule matched that carry a warning only
	// a person may accept (UnseenRisks): a person decides them, as at
	// their submission, so they count under no rule either.
	None, Errors, Held int
}

// RuleReplay is how many actions one rule would have decided.
type RuleReplay struct {
	Rule     string
	Decision classify.Decision
	Count    int
}

// Disagreement is one action a rule would have decided otherwise than a
// person: approve what they rejected, asked to change or approved only
// with an edit; reject what they approved.
type Disagreement struct {
	ActionID, Tool, Rule string
	Decision             classify.Decision
	// By is the person (user:EMAIL); Did what they did: rejected, asked
	// for changes, approved with an edit, approved.
	By, Did string
}

// ReplayPolicy runs the rules of p.Tools over the actions stored since
// p.Since, newest first by page, through r, which has no method that
// writes.
func ReplayPolicy(ctx context.Context, r Reader, p PolicyReplayParams) (PolicyReplay, error) {
	size := p.PageSize
	if size <= 0 {
		size = 500
	}
	byTool := map[string]*ToolReplay{}
	for _, t := range p.Tools.Tools() {
		if t.HasPolicy() {
			tr := &ToolReplay{Tool: t.Name}
			for _, r := range t.Approval.Policy {
				tr.Rules = append(tr.Rules, RuleReplay{Rule: r.Name, Decision: r.Decide})
			}
			byTool[t.Name] = tr
		}
	}
	var out PolicyReplay
	if err := replayPlans(ctx, r, p, size, &out.Plans); err != nil {
		return out, err
	}
	var after *Cursor
	for {
		page, err := r.ActionList(ctx, ActionListParams{After: after, Limit: size})
		if err != nil {
			return out, fmt.Errorf("policy test: read actions: %w", err)
		}
		for _, a := range page {
			if a.CreatedAt.Before(p.Since) {
				return out.sorted(byTool), nil
			}
			replayOne(p.Tools, a, byTool, &out)
		}
		if len(page) < size {
			return out.sorted(byTool), nil
		}
		last := page[len(page)-1]
		after = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// replayPlans judges the plans stored since p.Since, newest first by
// page; Each ends oldest first.
func replayPlans(ctx context.Context, r Reader, p PolicyReplayParams, size int, out *PlansReplay) error {
	var after *Cursor
	defer func() { slices.Reverse(out.Each) }()
	for {
		page, err := r.PlanList(ctx, PlanListParams{After: after, Limit: size})
		if err != nil {
			return fmt.Errorf("policy test: read plans: %w", err)
		}
		for _, pl := range page {
			if pl.CreatedAt.Before(p.Since) {
				return nil
			}
			out.add(replayPlan(p.Tools, pl))
		}
		if len(page) < size {
			return nil
		}
		last := page[len(page)-1]
		after = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

func (out *PlansReplay) add(pr PlanReplay) {
	out.Total++
	switch pr.Would {
	case PlanRejected:
		out.Rejected++
	case PlanApproved:
		out.Approved++
	default:
		out.Human++
	}
	out.Each = append(out.Each, pr)
}

// replayPlan judges each step of pl as its proposal would be judged under
// reg: the tool as reg has it, its rules evaluated over the step's
// payload at the plan's creation, the warnings that do not come from the
// file (invisible characters) kept.
func replayPlan(reg *classify.Registry, pl *Plan) PlanReplay {
	pr := PlanReplay{ID: pl.ID, Title: pl.Title, Was: pl.State, Would: PlanApproved}
	human := false
	for _, st := range pl.Steps {
		tool, registered := reg.Lookup(st.Tool)
		warnings := fileFreeWarnings(st.Warnings)
		if !registered {
			warnings = append(warnings, WarningToolNotRegistered)
		}
		var v classify.Verdict
		if tool.HasPolicy() {
			payload, err := DecodeObject(st.Payload)
			if err != nil {
				warnings = append(warnings, WarningPolicyError+":payload")
			} else {
				v = tool.Evaluate(classify.PolicyInput{Payload: payload, Tool: st.Tool, Agent: strings.TrimPrefix(pl.Agent, "agent:"),
					IntentKey: st.IntentKey, Attempt: 1, Now: pl.CreatedAt})
				warnings = append(warnings, policyWarnings(v)...)
			}
		}
		d, rule := StepDecision(tool.Class, v, warnings)
		pr.Steps = append(pr.Steps, StepReplay{N: st.N, Tool: st.Tool, Decision: d, Rule: rule})
		switch d {
		case StepReject:
			pr.Would = PlanRejected
		case StepHuman:
			human = true
		}
	}
	if human && pr.Would != PlanRejected {
		pr.Would = PlanPending
	}
	if pl.DecidedBy != nil && strings.HasPrefix(*pl.DecidedBy, "user:") {
		switch {
		case pr.Would == PlanApproved && pl.State == PlanRejected:
			pr.Did = "rejected"
		case pr.Would == PlanApproved && pl.State == PlanChangesRequested:
			pr.Did = "asked for changes"
		case pr.Would == PlanRejected && len(pl.Approvals) > 0 && pl.State != PlanRejected && pl.State != PlanChangesRequested:
			pr.Did = "approved"
		}
		if pr.Did != "" {
			pr.By = *pl.DecidedBy
		}
	}
	return pr
}

// fileFreeWarnings are the warnings of ws that do not come from the tools
// file (invisible characters, a key that looks random): a replay under
// another file keeps them and judges the rest anew.
func fileFreeWarnings(ws []string) []string {
	var out []string
	for _, w := range ws {
		if w != WarningToolNotRegistered && !strings.HasPrefix(w, WarningPolicyError+":") {
			out = append(out, w)
		}
	}
	return out
}

func replayOne(reg *classify.Registry, a *Action, byTool map[string]*ToolReplay, out *PolicyReplay) {
	tool, ok := reg.Lookup(a.Tool)
	if !ok || !tool.HasPolicy() {
		return
	}
	tr := byTool[a.Tool]
	out.Actions++
	payload, err := DecodeObject(a.Payload)
	if err != nil {
		tr.Errors++
		tr.None++
		return
	}
	v := tool.Evaluate(classify.PolicyInput{Payload: payload, Tool: a.Tool, Agent: a.Agent(), IntentKey: a.IntentKey,
		Attempt: a.Attempt, Now: a.CreatedAt})
	if v.Failed != nil {
		tr.Errors++
		return
	}
	if v.Rule == nil {
		tr.None++
		return
	}
	if v.Rule.Decide == classify.DecideApprove && len(UnseenRisks(fileFreeWarnings(a.Warnings))) > 0 {
		// What no person saw, no rule approves (routeAtSubmission).
		tr.Held++
		return
	}
	for i := range tr.Rules {
		if tr.Rules[i].Rule == v.Rule.Name {
			tr.Rules[i].Count++
		}
	}
	if did := disagrees(v.Rule.Decide, a); did != "" {
		out.Disagreements = append(out.Disagreements, Disagreement{ActionID: a.ID, Tool: a.Tool, Rule: v.Rule.Name,
			Decision: v.Rule.Decide, By: *a.DecidedBy, Did: did})
	}
}

// disagrees says what the person who decided a did against the rule's
// decision, or "" when no person decided it or they agree.
func disagrees(d classify.Decision, a *Action) string {
	if a.DecidedBy == nil || !strings.HasPrefix(*a.DecidedBy, "user:") {
		return ""
	}
	approved := a.ApprovedPayload != nil // a person's approval, whatever came after it
	switch d {
	case classify.DecideApprove:
		switch {
		case a.State == StateRejected:
			return "rejected"
		case a.State == StateChangesRequested:
			return "asked for changes"
		case approved && !JSONEqual(a.ApprovedPayload, a.Payload):
			return "approved with an edit"
		}
	case classify.DecideReject:
		if approved {
			return "approved"
		}
	}
	return ""
}

func (out PolicyReplay) sorted(byTool map[string]*ToolReplay) PolicyReplay {
	for _, tr := range byTool {
		out.Tools = append(out.Tools, *tr)
	}
	slices.SortFunc(out.Tools, func(a, b ToolReplay) int { return strings.Compare(a.Tool, b.Tool) })
	slices.Reverse(out.Disagreements) // they were read newest first
	return out
}
