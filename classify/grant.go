package classify

import (
	"fmt"
	"time"
)

// GrantLimits say whether approvers may grant "this, and the next ones like it" on a tool,
// and how far.
type GrantLimits struct {
	// Disabled: grants: false.
	Disabled bool `json:"disabled,omitempty"`
	// Max is the longest grant (default DefaultGrantMax); MaxUses the most actions one
	// grant approves (0: no limit).
	Max     time.Duration `json:"max"`
	MaxUses int           `json:"max_uses,omitempty"`
}

// GrantLimits returns the tool's grant limits and whether grants may be created on it at all:
// only at-most-once tools whose actions need one approval take grants, since a grant approves
// what no rule decided, and an exactly-once tool without a rule claims at once anyway.
func (t *Tool) GrantLimits() (GrantLimits, error) {
	l := GrantLimits{Max: DefaultGrantMax}
	if t.Approval != nil && t.Approval.Grants != nil {
		l = *t.Approval.Grants
	}
	switch {
	case t.Class != AtMostOnce:
		return l, fmt.Errorf("tool %s is %s: grants approve only at-most-once actions", t.Name, t.Class)
	case l.Disabled:
		return l, fmt.Errorf("tool %s does not allow grants (grants: false in the tools file)", t.Name)
	case t.Approval.RequiredApprovals() > 1:
		return l, fmt.Errorf("tool %s needs %d approvals of each action, so no single approver may grant its later ones", t.Name, t.Approval.RequiredApprovals())
	}
	return l, nil
}

// GrantsApply reports whether a submission of the tool that no rule decided may be approved
// by an active grant.
func (t *Tool) GrantsApply() bool {
	_, err := t.GrantLimits()
	return err == nil && t.Registered
}
