package queue_test

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/approvals/approvals/migrations"
	"github.com/approvals/approvals/queue"
)

// The partial unique index that makes one held action per intent key must
// spell out queue.HeldStates, the one Go definition: SQL cannot import it,
// so this test pins each store's literal to it. The last migration that
// (re)creates the index wins.
func TestHeldIntentIndexMatchesHeldStates(t *testing.T) {
	t.Parallel()
	index := regexp.MustCompile(`(?s)CREATE UNIQUE INDEX actions_held_intent\b.*?WHERE state IN \(([^)]*)\)`)
	want := make([]string, len(queue.HeldStates))
	for i, s := range queue.HeldStates {
		want[i] = string(s)
	}
	slices.Sort(want)
	for name, fsys := range map[string]fs.FS{"postgres": migrations.Postgres(), "sqlite": migrations.SQLite()} {
		files, err := fs.Glob(fsys, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(files)
		var got []string
		for _, f := range files {
			b, err := fs.ReadFile(fsys, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range index.FindAllStringSubmatch(string(b), -1) {
				got = got[:0]
				for _, s := range strings.Split(m[1], ",") {
					got = append(got, strings.Trim(strings.TrimSpace(s), "'"))
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: actions_held_intent covers %v, queue.HeldStates is %v", name, got, want)
		}
	}
}
