package sso

import (
	"fmt"
	"slices"
	"strings"

	"github.com/approvals/approvals/accounts"
)

// AnyGroup in a role map matches everyone the provider signs in.
const AnyGroup = "*"

// RoleRule gives Role to the people in Group.
type RoleRule struct {
	Group string
	Role  accounts.Role
}

// RoleMap is APPROVALS_OIDC_ROLES: rules in the order written; the first
// whose group the person is in gives the role.
type RoleMap []RoleRule

// ParseRoles reads "approvals-admins=admin,support=approver,*=viewer".
func ParseRoles(s string) (RoleMap, error) {
	var m RoleMap
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndexByte(part, '=')
		if i < 0 {
			return nil, fmt.Errorf("%q is not GROUP=ROLE, such as support=approver", part)
		}
		group, name := strings.TrimSpace(part[:i]), strings.TrimSpace(part[i+1:])
		if group == "" {
			return nil, fmt.Errorf("%q names no group; write GROUP=ROLE, or *=ROLE for everyone", part)
		}
		role, err := accounts.ParseRole(name)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		if slices.ContainsFunc(m, func(r RoleRule) bool { return r.Group == group }) {
			return nil, fmt.Errorf("group %q is named twice; the first would always win", group)
		}
		m = append(m, RoleRule{Group: group, Role: role})
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("no GROUP=ROLE rules, such as approvals-admins=admin,support=approver,*=viewer")
	}
	return m, nil
}

// RoleFor is the role of someone in groups: that of the first rule whose
// group they are in; false when none matches (no access).
func (m RoleMap) RoleFor(groups []string) (accounts.Role, bool) {
	for _, r := range m {
		if r.Group == AnyGroup || slices.Contains(groups, r.Group) {
			return r.Role, true
		}
	}
	return "", false
}

// String writes the map as APPROVALS_OIDC_ROLES does.
func (m RoleMap) String() string {
	parts := make([]string, len(m))
	for i, r := range m {
		parts[i] = r.Group + "=" + string(r.Role)
	}
	return strings.Join(parts, ",")
}
