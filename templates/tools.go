package templates

import "github.com/approvals/approvals/classify"

// ToolsView is the registry.
type ToolsView struct {
	Tools []classify.Tool
	Hash  string
	// ShowURLPaths shows URLs whose path is a credential whole (admins).
	ShowURLPaths bool
}

func previewNames(t classify.Tool) []string { return sortedKeys(t.Preview) }
