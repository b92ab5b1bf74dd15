package templates

import "github.com/approvals/approvals/classify"

// ToolsView is the registry.
type ToolsView struct {
	Tools []classify.Tool
	Hash  string
}

func previewNames(t classify.Tool) []string { return sortedKeys(t.Preview) }
