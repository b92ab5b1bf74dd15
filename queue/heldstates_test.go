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
// spell out queue.HeldStates, the one Go definition, and leave out the
// at-least-once class, which holds nothing in any state: SQL cannot import
// them, so this test pins each store's literal to them. The last migration
// whose Up section (re)creates the index wins.
func TestHeldIntentIndexMatchesHeldStates(t *testing.T) {
	t.Parallel()
	index := regexp.MustCompile(`(?s)CREATE UNIQUE INDEX actions_held_intent ON actions \(intent_key\)\s+WHERE (.*?);`)
	predicate := regexp.MustCompile(`^state IN \(([^)]*)\) AND class <> 'at-least-once'$`)
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
		var last string
		for _, f := range files {
			b, err := fs.ReadFile(fsys, f)
			if err != nil {
				t.Fatal(err)
			}
			up, _, _ := strings.Cut(string(b), "-- +goose Down")
			for _, m := range index.FindAllStringSubmatch(up, -1) {
				last = m[1]
			}
		}
		m := predicate.FindStringSubmatch(last)
		if m == nil {
			t.Errorf("%s: actions_held_intent's predicate is %q, want state IN (...) AND class <> 'at-least-once'", name, last)
			continue
		}
		var got []string
		for _, s := range strings.Split(m[1], ",") {
			got = append(got, strings.Trim(strings.TrimSpace(s), "'"))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: actions_held_intent covers %v, queue.HeldStates is %v", name, got, want)
		}
	}
}
