package storetest

import (
	"cmp"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// seedList submits actions whose keys probe the prefix search: LIKE's
// wildcards, GLOB's, and letter case must all be taken literally. Two
// actions share a created_at so that the id breaks the tie.
func seedList(t *testing.T, s Store) []*queue.Action {
	t.Helper()
	specs := []struct {
		class classify.Class
		tool  string
		key   string
		at    time.Duration
	}{
		{classify.AtMostOnce, "send_customer_email", "email:c-1:welcome", 0},
		{classify.AtMostOnce, "send_customer_email", "email:c-2:welcome", time.Minute},
		{classify.ExactlyOnce, "issue_refund", "refund:o-1:l-1", 2 * time.Minute},
		{classify.ExactlyOnce, "issue_refund", "refund:o-1:l-2", 2 * time.Minute},
		{classify.AtMostOnce, "send_customer_email", "Email:c-3:welcome", 3 * time.Minute},
		{classify.AtMostOnce, "post_publicly", "pct:50%:a", 4 * time.Minute},
		{classify.AtMostOnce, "post_publicly", "pct:500:b", 5 * time.Minute},
		{classify.AtMostOnce, "post_publicly", "us:a_b", 6 * time.Minute},
		{classify.AtMostOnce, "post_publicly", "us:axb", 7 * time.Minute},
		{classify.AtMostOnce, "post_publicly", "glob:*x", 8 * time.Minute},
		{classify.AtMostOnce, "post_publicly", "glob:ax", 9 * time.Minute},
		{classify.AtMostOnce, "post_publicly", "brk:[a]", 10 * time.Minute},
		{classify.AtMostOnce, "post_publicly", "brk:a", 11 * time.Minute},
		{classify.AtMostOnce, "post_publicly", `bs:\x`, 12 * time.Minute},
		{classify.AtMostOnce, "post_publicly", "bs:x", 13 * time.Minute},
		{classify.AtLeastOnce, "invalidate_cache", "email:c-1:welcome", 14 * time.Minute},
	}
	var out []*queue.Action
	for _, sp := range specs {
		out = append(out, submitNew(t, s, sp.class, sp.tool, sp.key, at(sp.at)))
	}
	// A few states to filter on.
	approve(t, s, out[1].ID, at(time.Hour))
	transition(t, s, completeParams(out[2].ID, at(time.Hour), `{"ok":true}`))
	for i, a := range out {
		out[i] = get(t, s, a.ID)
	}
	return out
}

// newestFirst orders like the store's default: (created_at, id) descending.
func newestFirst(list []*queue.Action) []*queue.Action {
	out := slices.Clone(list)
	slices.SortFunc(out, func(a, b *queue.Action) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return out
}

func idsOf(list []*queue.Action) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.ID
	}
	return out
}

func keysOf(list []*queue.Action) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.IntentKey
	}
	return out
}

var listTests = []test{
	{"ByIDs", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "ids:1", at(0))
		b := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "ids:2", at(time.Minute))
		submitNew(t, s, classify.AtMostOnce, "send_customer_email", "ids:3", at(2*time.Minute))
		got, err := s.ActionList(t.Context(), queue.ActionListParams{IDs: []string{b.ID, a.ID, "not-an-id", queue.NewID(at(0))}, Oldest: true, Limit: 10})
		noErr(t, err, "list by ids")
		eq(t, len(got), 2, "actions found")
		eq(t, got[0].ID, a.ID, "first (oldest)")
		eq(t, got[1].ID, b.ID, "second")
		none, err := s.ActionList(t.Context(), queue.ActionListParams{IDs: []string{}, Limit: 10})
		noErr(t, err, "list by no ids")
		eq(t, len(none), 0, "an empty id list matches nothing")
	}},
	{"PrefixCoversEveryClass", func(t *testing.T, s Store) {
		// PostgreSQL keeps the keys of at-least-once actions in an index
		// of their own (migration 00030): the search reads both.
		once := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "mix:1", at(0))
		email := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "mix:2", at(time.Minute))
		rec := submitNew(t, s, classify.AtLeastOnce, "invalidate_cache", "mix:3", at(2*time.Minute))
		submitNew(t, s, classify.AtLeastOnce, "invalidate_cache", "other:mix:4", at(3*time.Minute))
		got, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKeyPrefix: "mix:", Oldest: true, Limit: 10})
		noErr(t, err, "list by prefix")
		sliceEq(t, idsOf(got), []string{once.ID, email.ID, rec.ID}, "every class's actions by prefix")
	}},
	{"Filters", func(t *testing.T, s Store) {
		seed := seedList(t, s)
		list := func(p queue.ActionListParams) []string {
			t.Helper()
			p.Oldest = true
			if p.Limit == 0 {
				p.Limit = 100
			}
			got, err := s.ActionList(t.Context(), p)
			noErr(t, err, "list")
			return keysOf(got)
		}
		sliceEq(t, list(queue.ActionListParams{IntentKey: "email:c-1:welcome"}),
			[]string{"email:c-1:welcome", "email:c-1:welcome"}, "intent key")
		sliceEq(t, list(queue.ActionListParams{IntentKey: "email:c-1"}), []string{}, "intent key is exact")
		sliceEq(t, list(queue.ActionListParams{IntentKeyPrefix: "email:"}),
			[]string{"email:c-1:welcome", "email:c-2:welcome", "email:c-1:welcome"}, "prefix is case-sensitive")
		sliceEq(t, list(queue.ActionListParams{IntentKeyPrefix: "Email:"}), []string{"Email:c-3:welcome"}, "upper-case prefix")
		sliceEq(t, list(queue.ActionListParams{IntentKeyPrefix: "pct:50%"}), []string{"pct:50%:a"}, "percent is literal")
		sliceEq(t, list(queue.ActionListParams{IntentKeyPrefix: "us:a_"}), []string{"us:a_b"}, "underscore is literal")
		sliceEq(t, list(queue.ActionListParams{IntentKeyPrefix: "glob:*"}), []string{"glob:*x"}, "star is literal")
		sliceEq(t, list(queue.ActionListParams{IntentKeyPrefix: "brk:["}), []string{"brk:[a]"}, "bracket is literal")
		sliceEq(t, list(queue.ActionListParams{IntentKeyPrefix: `bs:\`}), []string{`bs:\x`}, "backslash is literal")
		sliceEq(t, list(queue.ActionListParams{IntentKeyPrefix: "refund:o-1:l-1"}), []string{"refund:o-1:l-1"}, "whole key as prefix")
		sliceEq(t, list(queue.ActionListParams{State: queue.StateApproved}), []string{"email:c-2:welcome"}, "state")
		sliceEq(t, list(queue.ActionListParams{State: queue.StateDone}), []string{"refund:o-1:l-1"}, "state done")
		refunds := []*queue.Action{seed[2], seed[3]} // created at the same instant: the id decides
		slices.SortFunc(refunds, func(a, b *queue.Action) int { return cmp.Compare(a.ID, b.ID) })
		sliceEq(t, list(queue.ActionListParams{Tool: "issue_refund"}), keysOf(refunds), "tool")
		sliceEq(t, list(queue.ActionListParams{Tool: "send_customer_email", State: queue.StatePending, IntentKeyPrefix: "email:"}),
			[]string{"email:c-1:welcome"}, "filters combine")
		sliceEq(t, list(queue.ActionListParams{IntentKeyPrefix: "email:", Limit: 2}),
			[]string{"email:c-1:welcome", "email:c-2:welcome"}, "limit")
		eq(t, len(list(queue.ActionListParams{})), len(seed), "no filter")

		// Held: the key's holder only, never an at-least-once action of the
		// same key (done after an upstream call, a held state for any other
		// class) nor a released attempt.
		alo := seed[len(seed)-1]
		eq(t, alo.Class, classify.AtLeastOnce, "the last seeded action's class")
		transition(t, s, recordOutcomeParams(alo.ID, queue.StateDone, at(2*time.Hour)))
		holders := func(key string) []string {
			t.Helper()
			got, err := s.ActionList(t.Context(), queue.ActionListParams{IntentKey: key, Held: true, Limit: 10})
			noErr(t, err, "list the holder of "+key)
			ids := []string{}
			for _, a := range got {
				ids = append(ids, a.ID)
			}
			return ids
		}
		sliceEq(t, holders("email:c-1:welcome"), []string{seed[0].ID}, "holder beside an at-least-once action of its key")
		sliceEq(t, holders("refund:o-1:l-1"), []string{seed[2].ID}, "done holds its key")
		eq(t, len(list(queue.ActionListParams{Held: true})), len(seed)-1, "every action but the at-least-once one holds its key")
		transition(t, s, cancelParams(seed[4].ID, at(2*time.Hour)))
		sliceEq(t, holders("Email:c-3:welcome"), []string{}, "a cancelled action holds nothing")
	}},
	{"WebhookFilter", func(t *testing.T, s Store) {
		hook := newAction(classify.AtMostOnce, "send_customer_email", "email:hook", at(0))
		hook.Spec.Executor = &classify.Executor{Webhook: "http://127.0.0.1:9000/send", Timeout: 30 * time.Second}
		submit(t, s, hook)
		plain := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "email:plain", at(time.Second))
		approve(t, s, hook.ID, at(time.Minute))
		approve(t, s, plain.ID, at(time.Minute))
		got, err := s.ActionList(t.Context(), queue.ActionListParams{State: queue.StateApproved, ServerExecuted: true, Oldest: true, Limit: 10})
		noErr(t, err, "list")
		sliceEq(t, keysOf(got), []string{"email:hook"}, "approved webhook actions")
		got, err = s.ActionList(t.Context(), queue.ActionListParams{State: queue.StateApproved, Oldest: true, Limit: 10})
		noErr(t, err, "list")
		sliceEq(t, keysOf(got), []string{"email:hook", "email:plain"}, "all approved actions")
	}},
	{"Order", func(t *testing.T, s Store) {
		seed := seedList(t, s)
		want := ids(newestFirst(seed))
		got, err := s.ActionList(t.Context(), queue.ActionListParams{Limit: 100})
		noErr(t, err, "list newest first")
		sliceEq(t, ids(got), want, "newest first")
		got, err = s.ActionList(t.Context(), queue.ActionListParams{Oldest: true, Limit: 100})
		noErr(t, err, "list oldest first")
		slices.Reverse(want)
		sliceEq(t, ids(got), want, "oldest first")
	}},
	{"KeysetPagination", func(t *testing.T, s Store) {
		seed := seedList(t, s)
		for _, oldest := range []bool{false, true} {
			want := ids(newestFirst(seed))
			if oldest {
				slices.Reverse(want)
			}
			for _, limit := range []int{1, 2, 3, 5} {
				var all []string
				var after *queue.Cursor
				for page := 0; page <= len(seed); page++ {
					got, err := s.ActionList(t.Context(), queue.ActionListParams{Oldest: oldest, After: after, Limit: limit})
					noErr(t, err, "page")
					if len(got) > limit {
						t.Fatalf("page of %d with limit %d", len(got), limit)
					}
					all = append(all, ids(got)...)
					if len(got) < limit {
						break
					}
					last := got[len(got)-1]
					after = &queue.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
				}
				sliceEq(t, all, want, "pages joined")
			}
		}
		// A cursor continues strictly after its position, also within a filter.
		tied, err := s.ActionList(t.Context(), queue.ActionListParams{Tool: "issue_refund", Oldest: true, Limit: 1})
		noErr(t, err, "first of the tie")
		rest, err := s.ActionList(t.Context(), queue.ActionListParams{Tool: "issue_refund", Oldest: true, Limit: 10,
			After: &queue.Cursor{CreatedAt: tied[0].CreatedAt, ID: tied[0].ID}})
		noErr(t, err, "rest of the tie")
		eq(t, len(rest), 1, "actions after the first of a tie")
		if rest[0].ID == tied[0].ID {
			t.Fatal("the cursor's own action was listed again")
		}
		timeEq(t, rest[0].CreatedAt, tied[0].CreatedAt, "tie")
	}},
	{"TicketOnListedActions", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:t-1", at(0))
		b := submitNew(t, s, classify.ExactlyOnce, "issue_refund", "refund:t-2", at(time.Hour))
		opened, err := s.TicketOpenStale(t.Context(), queue.StaleDue(at(10*time.Minute), 10))
		noErr(t, err, "open stale")
		eq(t, len(opened), 1, "opened")
		list, err := s.ActionList(t.Context(), queue.ActionListParams{Tool: "issue_refund", Oldest: true, Limit: 10})
		noErr(t, err, "list")
		sliceEq(t, ids(list), []string{a.ID, b.ID}, "listed")
		if list[0].Ticket == nil || list[0].Ticket.ID != opened[0].ID {
			t.Fatalf("ticket of the stale action: got %+v, want %s", list[0].Ticket, opened[0].ID)
		}
		if list[1].Ticket != nil {
			t.Fatalf("ticket of the fresh action: got %+v, want none", list[1].Ticket)
		}
	}},
}

var eventTests = []test{
	{"InsertAndList", func(t *testing.T, s Store) {
		a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "ev:1", at(0))
		b := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "ev:2", at(0))
		for i := range 4 {
			noErr(t, s.EventInsert(t.Context(), queue.Event{ActionID: a.ID, Kind: queue.EventReplayed, Actor: "agent:other",
				Channel: "mcp", At: at(time.Duration(i+1) * time.Minute), Data: json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`)}), "insert")
		}
		noErr(t, s.EventInsert(t.Context(), queue.Event{ActionID: a.ID, Kind: queue.EventReused, Actor: agent,
			At: at(time.Hour)}), "insert without data")

		all := events(t, s, a.ID)
		eq(t, len(all), 6, "events of a")
		for i := 1; i < len(all); i++ {
			if all[i].ID >= all[i-1].ID {
				t.Fatalf("events not newest first: %d after %d", all[i].ID, all[i-1].ID)
			}
		}
		eq(t, all[0].Kind, queue.EventReused, "newest")
		eq(t, len(all[0].Data), 0, "no data")
		eq(t, all[1].Kind, queue.EventReplayed, "second newest")
		eq(t, all[1].Channel, "mcp", "channel")
		eq(t, all[1].Actor, "agent:other", "actor")
		eq(t, all[1].ActionID, a.ID, "action")
		timeEq(t, all[1].At, at(4*time.Minute), "at")
		jsonEq(t, all[1].Data, []byte(`{"n":3}`), "data")
		eq(t, all[5].Kind, queue.EventSubmitted, "oldest")

		byKind, err := s.EventList(t.Context(), queue.EventListParams{Kind: queue.EventSubmitted, Limit: 10})
		noErr(t, err, "by kind")
		eq(t, len(byKind), 2, "submitted events of both actions")
		eq(t, byKind[0].ActionID, b.ID, "newest submitted")
		byActor, err := s.EventList(t.Context(), queue.EventListParams{Actor: "agent:other", Limit: 10})
		noErr(t, err, "by actor")
		eq(t, len(byActor), 4, "events by actor")

		var paged []int64
		before := int64(0)
		for range 10 {
			page, err := s.EventList(t.Context(), queue.EventListParams{ActionID: a.ID, BeforeID: before, Limit: 4})
			noErr(t, err, "page")
			for _, ev := range page {
				paged = append(paged, ev.ID)
			}
			if len(page) < 4 {
				break
			}
			before = page[len(page)-1].ID
		}
		want := make([]int64, len(all))
		for i, ev := range all {
			want[i] = ev.ID
		}
		sliceEq(t, paged, want, "pages joined")
	}},
	{"UnknownAction", func(t *testing.T, s Store) {
		err := s.EventInsert(t.Context(), queue.Event{ActionID: queue.NewID(at(0)), Kind: queue.EventReplayed, Actor: agent, At: at(0)})
		isErr(t, err, queue.ErrNotFound, "event of an unknown action")
		err = s.TicketCheckRecord(t.Context(), queue.TicketCheckRecordParams{Event: queue.Event{ActionID: queue.NewID(at(0)),
			Kind: queue.EventVerified, Actor: "verifier:issue_refund", Channel: queue.ChannelVerifier, At: at(0)}})
		isErr(t, err, queue.ErrNotFound, "verifier's check of an unknown action")
	}},
	{"UnknownActionsAmongConcurrent", func(t *testing.T, s Store) {
		// Concurrent records, which a store may merge into one statement:
		// each one of an unknown action is refused alone, each of a known
		// action is appended once.
		a := submitNew(t, s, classify.AtMostOnce, "email", "ev:concurrent", at(0))
		const n = 16
		errs := make([]error, n)
		race(n, func(i int) {
			id := a.ID
			if i%2 == 1 {
				id = queue.NewID(at(time.Duration(i) * time.Second))
			}
			errs[i] = s.EventInsert(t.Context(), queue.Event{ActionID: id, Kind: queue.EventReplayed, Actor: agent, At: at(time.Minute)})
		})
		for i, err := range errs {
			if i%2 == 1 {
				isErr(t, err, queue.ErrNotFound, "record of an unknown action")
			} else {
				noErr(t, err, "record of a known action")
			}
		}
		eq(t, countKind(eventKinds(t, s, a.ID), queue.EventReplayed), n/2, "records appended to the known action")
	}},
}
