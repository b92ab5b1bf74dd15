package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// ErrorOf is the one classification every face uses: domain errors pass
// through, anything else is internal while storage answers and
// unavailable once it does not.
func TestErrorOf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: true})
	st := e.Store
	conflict := queue.Errorf(queue.CodeInvalidTransition, "cannot approve")
	for _, tc := range []struct {
		name string
		err  error
		want queue.Code
	}{
		{"domain error", conflict, queue.CodeInvalidTransition},
		{"wrapped domain error", fmt.Errorf("approve: %w", conflict), queue.CodeInvalidTransition},
		{"unexpected error, storage up", errors.New("boom"), queue.CodeInternal},
	} {
		if got := queue.ErrorOf(ctx, tc.err, st, nil); got.Code != tc.want {
			t.Errorf("%s: code %s, want %s", tc.name, got.Code, tc.want)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	got := queue.ErrorOf(ctx, errors.New("sql: database is closed"), st, nil)
	// problem answers unavailable with 503 (TestStatus).
	if got.Code != queue.CodeUnavailable {
		t.Fatalf("storage down: %s, want unavailable", got.Code)
	}
	if got.Detail == "" || got.Detail == "sql: database is closed" {
		t.Fatalf("detail %q: must say what to do and reveal nothing", got.Detail)
	}
}
