package accounts_test

import (
	"net/http/httptest"
	"testing"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

// The bearer token is read the same way for every agent face: any case of
// "Bearer", surrounding space trimmed, and anything else unauthorized.
func TestBearerHash(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]string{
		"Bearer apv_secret":   accounts.HashToken("apv_secret"),
		"bearer  apv_secret ": accounts.HashToken("apv_secret"),
		"":                    "",
		"Bearer":              "",
		"Bearer   ":           "",
		"Basic apv_secret":    "",
	} {
		r := httptest.NewRequest("GET", "/api/v1/tools", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		got, err := accounts.BearerHash(r)
		switch {
		case want == "" && queue.ErrorCode(err) != queue.CodeUnauthorized:
			t.Errorf("%q: %q, %v; want unauthorized", header, got, err)
		case want != "" && (err != nil || got != want):
			t.Errorf("%q: %q, %v; want the token's hash", header, got, err)
		}
	}
}
