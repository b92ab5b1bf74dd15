package accounts

import (
	"strings"
	"testing"
)

func TestValidateTokenName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"billing-bot": true, "a.b_c-1": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "two words": false, "agent:x": false, "bötchen": false,
	} {
		if err := ValidateTokenName(name); (err == nil) != ok {
			t.Errorf("ValidateTokenName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}
