package classify

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ruleKeys are the keys of one policy rule.
var ruleKeys = []string{"approvers", "decide", "name", "note", "required", "when"}

// policy reads approval.policy: a list of rules, each compiled now. a is the
// tool's rule as read so far (its approvers, required and escalation), whose
// required or approvers a human rule that names none decides with.
func (p *toolParser) policy(n *yaml.Node, t *Tool, a *Approval) []Rule {
	if n.Kind != yaml.SequenceNode {
		p.fail("approval.policy", n.Line, "must be a list of rules ({name, when, decide}), found %s", nodeKind(n))
		return nil
	}
	if len(n.Content) > MaxRules {
		p.fail("approval.policy", n.Line, "has %d rules; a tool has at most %d", len(n.Content), MaxRules)
		return nil
	}
	var rules []Rule
	seen := map[string]int{}
	for i, item := range n.Content {
		item = resolveAlias(item)
		field := fmt.Sprintf("approval.policy[%d]", i)
		if item.Kind != yaml.MappingNode {
			p.fail(field, item.Line, "a rule is a mapping of keys (%s), found %s", strings.Join(ruleKeys, ", "), nodeKind(item))
			continue
		}
		fields := p.mapping(item, field, ruleKeys)
		r := Rule{Decide: DecideHuman}
		if !p.scalarAt(fields, "name", field+".name", &r.Name) || r.Name == "" {
			p.fail(field, item.Line, "a rule needs a name (it shows in decided_by as policy:NAME)")
			continue
		}
		// Every message names the rule as well as its place in the list.
		fail := func(key string, line int, format string, args ...any) {
			f := field
			if key != "" {
				f += "." + key
			}
			p.fail(f, line, "rule %q: %s", r.Name, fmt.Sprintf(format, args...))
		}
		if err := checkRuleName(r.Name); err != nil {
			fail("name", item.Line, "%v", err)
			continue
		}
		if line, dup := seen[r.Name]; dup {
			fail("name", item.Line, "rule name used twice in this tool's policy (first at line %d)", line)
			continue
		}
		seen[r.Name] = item.Line
		var decide string
		if p.scalarAt(fields, "decide", field+".decide", &decide) {
			switch Decision(decide) {
			case DecideApprove, DecideReject, DecideHuman:
				r.Decide = Decision(decide)
			default:
				fail("decide", fields["decide"].Line, "%q is not a decision; use approve, reject or human", decide)
				continue
			}
		}
		p.scalarAt(fields, "note", field+".note", &r.Note)
		if r.Decide == DecideReject && strings.TrimSpace(r.Note) == "" {
			fail("note", item.Line, "a reject rule needs a note: what the agent is told")
		}
		if r.Decide != DecideReject && fields["note"] != nil {
			fail("note", fields["note"].Line, "only a reject rule has a note")
		}
		if v := fields["required"]; v != nil && !isNull(v) {
			n, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil || n < 1 {
				fail("required", v.Line, "must be a whole number of at least 1, found %s", nodeKind(v))
			} else {
				r.Required = n
			}
		}
		if v := fields["approvers"]; v != nil {
			for _, g := range p.names(v, field+".approvers") {
				m, ok := p.routing.groups[g]
				if !ok {
					fail("approvers", v.Line, "unknown group %q; groups: %s", g, listOrNone(slices.Sorted(maps.Keys(p.routing.groups))))
					continue
				}
				r.Approvers = append(r.Approvers, g)
				for _, member := range m {
					if name, ok := strings.CutPrefix(member, IdPPrefix); ok {
						r.ApproverIdPGroups = append(r.ApproverIdPGroups, name)
					} else {
						r.ApproverEmails = append(r.ApproverEmails, member)
					}
				}
			}
			slices.Sort(r.ApproverEmails)
			r.ApproverEmails = slices.Compact(r.ApproverEmails)
			slices.Sort(r.ApproverIdPGroups)
			r.ApproverIdPGroups = slices.Compact(r.ApproverIdPGroups)
		}
		if r.Decide != DecideHuman && (fields["required"] != nil || fields["approvers"] != nil) {
			fail("decide", item.Line, "required and approvers belong to a human rule: they say who decides what it leaves to a person")
		}
		// The rule's actions need what UnderRule gives them: the rule's required
		// and approvers, else the tool's, and the tool's escalation. An identity
		// provider group's members only the provider knows: with one among the
		// eligible, the tools file cannot count them.
		if under := a.UnderRule(&r); r.Decide == DecideHuman && len(under.Approvers) > 0 && under.CountsPeople() {
			eligible := slices.Concat(under.ApproverEmails, under.EscalateEmails)
			slices.Sort(eligible)
			if people := len(slices.Compact(eligible)); under.Required > people {
				line := item.Line
				if f := fields["required"]; f != nil {
					line = f.Line
				}
				fail("required", line, "%d approvals need %d different people, but its approvers and escalate_to have only %d", under.Required, under.Required, people)
			}
		}
		if !p.scalarAt(fields, "when", field+".when", &r.When) || strings.TrimSpace(r.When) == "" {
			fail("when", item.Line, "a rule needs when: a CEL expression over payload, tool, agent, intent_key, attempt and now")
			continue
		}
		prog, attempt, err := compileRule(r.When)
		if err != nil {
			fail("when", fields["when"].Line, "%v", err)
			continue
		}
		r.prog, r.usesAttempt = prog, attempt
		rules = append(rules, r)
	}
	return rules
}

// checkRuleName keeps rule names to what reads well in policy:NAME and in metric labels.
func checkRuleName(name string) error {
	if len(name) > 64 {
		return errors.New("a rule name has at most 64 characters")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("a rule name uses only letters, digits, '_', '.' and '-'; %q is not allowed", c)
		}
	}
	return nil
}

// grants reads approval.grants: false, or {max, max_uses}.
func (p *toolParser) grants(n *yaml.Node) *GrantLimits {
	l := &GrantLimits{Max: DefaultGrantMax}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		var b bool
		if n.Decode(&b) == nil {
			if !b {
				l.Disabled = true
			}
			return l
		}
	}
	if n.Kind != yaml.MappingNode {
		p.fail("approval.grants", n.Line, "must be false or a mapping {max, max_uses}, found %s", nodeKind(n))
		return nil
	}
	fields := p.mapping(n, "approval.grants", []string{"max", "max_uses"})
	p.duration(fields, "max", "approval.grants.max", &l.Max)
	if v := fields["max_uses"]; v != nil && !isNull(v) {
		n, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil || n < 1 {
			p.fail("approval.grants.max_uses", v.Line, "must be a whole number of at least 1, found %s", nodeKind(v))
		} else {
			l.MaxUses = n
		}
	}
	return l
}
