package classify

// BulkApprovable reports whether actions of t may be approved in bulk: approval.bulk false
// asks that each be reviewed on its own page. No rule, or no bulk setting, allows it.
func (t Tool) BulkApprovable() bool { return t.Approval.BulkAllowed() }
