package templates

import "sort"

// ErrorView is a page or fragment for an error.
type ErrorView struct {
	Status int
	Title  string
	Detail string
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
