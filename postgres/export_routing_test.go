package postgres

// RoutingDueStatements exposes the sweep's reminder and escalation scans to
// the plan test.
var RoutingDueStatements = map[string]string{
	"remind":   remindDueSQL,
	"escalate": escalateDueSQL,
}
