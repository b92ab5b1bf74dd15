package classify

// approvalRule is the tool's approval rule, or nil when it has none.
//
// The routing work attaches the Approval rule to Tool; until then no tool
// has one. Connecting it is this one line: return t.Approval (or
// &t.Approval, whichever the field is).
func (t Tool) approvalRule() *Approval { return nil }
