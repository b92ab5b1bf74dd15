package classify

// BulkAllowed reports whether the rule lets actions be approved in bulk:
// approval.bulk false asks that each be reviewed on its own page. No rule,
// or no bulk setting, allows it.
func (a *Approval) BulkAllowed() bool { return a == nil || a.Bulk == nil || *a.Bulk }

// BulkApprovable reports whether actions of t may be approved in bulk.
func (t Tool) BulkApprovable() bool { return t.approvalRule().BulkAllowed() }
