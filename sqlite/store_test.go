package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/storetest"
)

func openTestStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) storage.Store {
		return openTestStore(t, filepath.Join(t.TempDir(), "a.db"))
	})
}

var t0 = time.Date(2031, time.March, 14, 9, 0, 0, 0, time.UTC)

func claim(key string, now time.Time) *queue.Action {
	return &queue.Action{ID: queue.NewID(now), Tool: "issue_refund", Class: classify.ExactlyOnce, IntentKey: key,
		State: queue.StateInProgress, Payload: json.RawMessage(`{"n":1}`), RequestedBy: "agent:test", CreatedAt: now, ClaimedAt: &now,
		Spec: classify.Tool{Name: "issue_refund", Class: classify.ExactlyOnce, ClaimTimeout: time.Minute}}
}

func submitEvent(a *queue.Action) queue.Event {
	return queue.Event{Kind: queue.EventSubmitted, Actor: a.RequestedBy, At: a.CreatedAt}
}

// The file outlives the store: reopening applies no migration twice and
// finds the data. The path may hold characters that mean something in a URI.
func TestReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dir with space", "a?b#c%20.db")
	s, err := Open(t.Context(), path)
	if err == nil {
		s.Close()
		t.Fatal("opened a database in a directory that does not exist")
	}
	path = filepath.Join(t.TempDir(), "a?b#c%20 d.db")
	s, err = Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	a := claim("reopen:1", t0)
	if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submitEvent(a)}); err != nil {
		t.Fatalf("submit: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	s = openTestStore(t, path)
	got, err := s.ActionGetByID(t.Context(), a.ID)
	if err != nil {
		t.Fatalf("get after reopen: %v", err)
	}
	if got.IntentKey != "reopen:1" {
		t.Fatalf("intent key after reopen: %q", got.IntentKey)
	}
}

// Several processes (a server and the CLI, say) may open one file at once,
// even before it has a schema.
func TestOpenConcurrently(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	const n = 8
	stores := make([]*Store, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), path)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		stores[i].Close()
	}
}

// Two stores on one file are two writers that only SQLite's lock
// serialises: the immediate transactions and the busy timeout must still
// keep every "database is locked" away from callers.
func TestTwoStoresOneFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	stores := []*Store{openTestStore(t, path), openTestStore(t, path)}
	const n = 50
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			s := stores[i%2]
			now := t0.Add(time.Duration(i) * time.Second)
			a := claim(fmt.Sprintf("two:%d", i), now)
			if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submitEvent(a)}); err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = s.ActionTransition(t.Context(), queue.ActionTransitionParams{ID: a.ID,
				From: []queue.State{queue.StateInProgress}, To: queue.StateDone, Now: now, FinishedAt: &now,
				Result: json.RawMessage(`{}`), Event: queue.Event{Kind: queue.EventCompleted, Actor: "agent:test"}})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	counts, err := stores[0].ActionCountByState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if counts[queue.StateDone] != n {
		t.Fatalf("done: %d, want %d", counts[queue.StateDone], n)
	}
}

// Two stores on one file are two processes' worth of writers: each has its
// own write connection, so submissions of one intent overlap in SQLite
// itself (within one store the one writer goroutine would serialise
// them in Go). Only the schema's partial unique index and the immediate
// transactions keep the intent to one holder.
func TestOneIntentTwoStoresOneFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	stores := []*Store{openTestStore(t, path), openTestStore(t, path)}
	for _, class := range []classify.Class{classify.ExactlyOnce, classify.AtMostOnce} {
		const n = 40
		key := "one:" + string(class)
		holders := make([]*queue.Action, n)
		created := make([]bool, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				now := t0.Add(time.Duration(i) * time.Millisecond)
				a := claim(key, now)
				if class == classify.AtMostOnce {
					a.Class, a.State, a.ClaimedAt = class, queue.StatePending, nil
				}
				var res queue.ActionSubmitResult
				res, errs[i] = stores[i%2].ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submitEvent(a)})
				holders[i], created[i] = res.Holder, res.Created
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("%s: submitter %d (store %d): %v", class, i, i%2, errs[i])
			}
			if created[i] {
				if winner >= 0 {
					t.Fatalf("%s: submitters %d and %d both created an action", class, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("%s: nobody created the action", class)
		}
		for i := range n {
			if holders[i].ID != holders[winner].ID {
				t.Fatalf("%s: submitter %d (store %d) sees holder %s, want %s", class, i, i%2, holders[i].ID, holders[winner].ID)
			}
		}
		for i, s := range stores {
			list, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: key, Limit: 100})
			if err != nil {
				t.Fatalf("list through store %d: %v", i, err)
			}
			if len(list) != 1 || list[0].Attempt != 1 {
				t.Fatalf("%s: store %d lists %d actions for the intent, want one (attempt 1)", class, i, len(list))
			}
		}
	}
}

// Close releases long-polls waiting on a subscription.
func TestCloseReleasesSubscribers(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe()
	ch, cancel := sub.Changes, sub.Cancel
	defer cancel()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("got a change instead of a closed channel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscription still open after Close")
	}
}

// The schema itself refuses what the state machine forbids, whatever the
// caller passes.
func TestSchemaRefusesIllegalRows(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, filepath.Join(t.TempDir(), "a.db"))
	cases := map[string]func(a *queue.Action){
		"recorded exactly-once": func(a *queue.Action) { a.State = queue.StateRecorded },
		"pending at-least-once": func(a *queue.Action) { a.Class, a.State = classify.AtLeastOnce, queue.StatePending },
		"unknown state":         func(a *queue.Action) { a.State = "limbo" },
		"unknown class":         func(a *queue.Action) { a.Class = "twice" },
		"payload not an object": func(a *queue.Action) { a.Payload = json.RawMessage(`[1]`) },
		"payload not JSON":      func(a *queue.Action) { a.Payload = json.RawMessage(`{`) },
		"empty key":             func(a *queue.Action) { a.IntentKey = "" },
		"result not JSON":       func(a *queue.Action) { a.Result = json.RawMessage(`nope`) },
	}
	for name, mutate := range cases {
		a := claim("schema:"+name, t0)
		mutate(a)
		if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submitEvent(a)}); err == nil {
			t.Errorf("%s: stored", name)
		}
	}
	// A claim without a deadline cannot be stored either.
	a := &queue.Action{ID: queue.NewID(t0), Tool: "send", Class: classify.AtMostOnce, IntentKey: "schema:claim",
		State: queue.StatePending, Payload: json.RawMessage(`{}`), RequestedBy: "agent:test", CreatedAt: t0}
	if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submitEvent(a)}); err != nil {
		t.Fatal(err)
	}
	now := t0
	if _, err := s.ActionTransition(t.Context(), queue.ActionTransitionParams{ID: a.ID, From: []queue.State{queue.StatePending},
		To: queue.StateInProgress, Now: now, ClaimedAt: &now}); err == nil {
		t.Error("in_progress without a claim deadline: stored")
	}
}

func TestGlobEscape(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain:key": "plain:key",
		"a*b?c[d]e": "a[*]b[?]c[[]d]e",
		"50%_x":     "50%_x",
	} {
		if got := globEscape(in); got != want {
			t.Errorf("globEscape(%q) = %q, want %q", in, got, want)
		}
	}
}

// The write connection keeps temporary files, the savepoints' sub-journal
// among them, in memory (temp_store=2), and still commits with
// synchronous=FULL (2) in WAL.
func TestWriteConnectionSettings(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, filepath.Join(t.TempDir(), "a.db"))
	var tempStore, synchronous int
	var journal string
	err := s.withTx(t.Context(), func(ctx context.Context, q querier) error {
		if err := q.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&tempStore); err != nil {
			return err
		}
		if err := q.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&synchronous); err != nil {
			return err
		}
		return q.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal)
	})
	if err != nil {
		t.Fatal(err)
	}
	if tempStore != 2 || synchronous != 2 || journal != "wal" {
		t.Fatalf("write connection: temp_store=%d synchronous=%d journal_mode=%s, want 2, 2, wal", tempStore, synchronous, journal)
	}
}

// A row is decoded only after its commit, so a time it could not read back
// (timeLayout has four-digit years) is refused before anything is written:
// an error still means "not written".
func TestUnstorableTimeWritesNothing(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, filepath.Join(t.TempDir(), "a.db"))
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	a := claim("far:1", t0)
	a.CreatedAt = far
	if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submitEvent(a)}); err == nil {
		t.Fatal("submitted an action created in the year 10000")
	}
	if _, err := s.ActionGetByID(t.Context(), a.ID); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("refused submission: get: %v, want ErrNotFound", err)
	}

	b := claim("far:2", t0)
	if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: b, Event: submitEvent(b)}); err != nil {
		t.Fatal(err)
	}
	_, err := s.ActionTransition(t.Context(), queue.ActionTransitionParams{ID: b.ID,
		From: []queue.State{queue.StateInProgress}, To: queue.StateDone, Now: t0,
		Result: json.RawMessage(`{}`), FinishedAt: &far, Event: queue.Event{Kind: queue.EventCompleted, Actor: "agent:test"}})
	if err == nil {
		t.Fatal("completed an action in the year 10000")
	}
	got, err := s.ActionGetByID(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != queue.StateInProgress || got.FinishedAt != nil {
		t.Fatalf("refused transition: action is %s, finished at %v; want in_progress, unfinished", got.State, got.FinishedAt)
	}
}
