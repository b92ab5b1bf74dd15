package postgres

// HolderStatements exposes the statements that look for the holder of an
// intent key to the plan test.
var HolderStatements = map[string]string{
	"submitSQL":           submitSQL,
	"submitManySQL":       submitManySQL,
	"replayLookupOneSQL":  replayLookupOneSQL,
	"replayLookupManySQL": replayLookupManySQL,
}
