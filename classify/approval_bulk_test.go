package classify_test

import (
	"testing"

	"github.com/approvals/approvals/classify"
)

func TestApprovalBulkAllowed(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	for _, tc := range []struct {
		name string
		rule *classify.Approval
		want bool
	}{
		{"no rule", nil, true},
		{"bulk unset", &classify.Approval{Required: 2}, true},
		{"bulk true", &classify.Approval{Bulk: &yes}, true},
		{"bulk false", &classify.Approval{Bulk: &no}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.rule.BulkAllowed(); got != tc.want {
				t.Fatalf("BulkAllowed() = %v, want %v", got, tc.want)
			}
		})
	}
}
