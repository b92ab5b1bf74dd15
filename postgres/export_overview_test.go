package postgres

// OverviewStatements exposes the overview's statements to the plan test.
var OverviewStatements = map[string]string{
	"pending by tool":    sqlPendingByTool,
	"decision count":     sqlDecisionCount,
	"decision times":     sqlDecisionTimes,
	"hourly":             sqlHourly,
	"ticket resolutions": sqlTicketResolutions,
}
