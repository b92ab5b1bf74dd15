package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

var overviewTests = []test{
	// Known data around an injected now gives exact numbers: every window
	// edge has an action just inside or outside it, and decisions by the
	// system (expiry) or an agent (cancel) count for nothing.
	{"ExactNumbers", func(t *testing.T, s Store) {
		now := at(8 * 24 * time.Hour) // 2031-03-22 09:26:53
		const toolA, toolB = "send_customer_email", "post_public_update"
		n := 0
		add := func(tool string, created time.Duration) *queue.Action {
			n++
			return submitNew(t, s, classify.AtMostOnce, tool, fmt.Sprintf("ov:%d", n), now.Add(-created))
		}
		decide := func(a *queue.Action, to queue.State, by string, decided time.Duration) {
			when := now.Add(-decided)
			p := queue.ActionTransitionParams{ID: a.ID, From: []queue.State{queue.StatePending}, To: to, Now: when,
				DecidedBy: ptr(by), DecidedAt: ptr(when), Event: queue.Event{Kind: string(to), Actor: by, At: when}}
			if to != queue.StateApproved {
				p.FinishedAt = ptr(when)
			}
			transition(t, s, p)
		}
		const h, d = time.Hour, 24 * time.Hour
		// Pending: two of A (one ten days old), one of B.
		add(toolA, 10*d)
		add(toolA, 2*h)
		add(toolB, 30*time.Minute)
		// A, three days ago: decided after 10, 20, 30 and 40 minutes.
		for i, took := range []time.Duration{40, 10, 30, 20} {
			by := "user:ann@example.com"
			if i%2 == 1 {
				by = "user:bob@example.com"
			}
			decide(add(toolA, 3*d), queue.StateApproved, by, 3*d-took*time.Minute)
		}
		// A, in the last day: approved after an hour, 30 minutes ago.
		decide(add(toolA, 90*time.Minute), queue.StateApproved, "user:ann@example.com", 30*time.Minute)
		// A, eight days ago, after five days: outside the 7-day window.
		decide(add(toolA, 13*d), queue.StateApproved, "user:ann@example.com", 8*d)
		// B: rejected after an hour, 4 hours ago; and after two hours
		// exactly 24 hours ago (in the 7 days, not in the last 24 hours).
		decide(add(toolB, 5*h), queue.StateRejected, "user:bob@example.com", 4*h)
		decide(add(toolB, 26*h), queue.StateApproved, "user:bob@example.com", 24*h)
		// Not decisions by a person: an expiry and a cancel.
		decide(add(toolB, 3*h), queue.StateExpired, "system", h)
		decide(add(toolA, 20*h), queue.StateCancelled, agent, 19*h)
		// One open ticket (its action was submitted at t0, eight days ago).
		staleTicket(t, s, "ov:ticket")

		o, err := queue.ReadOverview(t.Context(), s, now, nil)
		noErr(t, err, "overview")

		wantPending := []queue.ToolPending{{Tool: toolB, Pending: 1, Oldest: now.Add(-30 * time.Minute)},
			{Tool: toolA, Pending: 2, Oldest: now.Add(-10 * d)}}
		if len(o.Pending) != 2 {
			t.Fatalf("pending %+v, want %+v", o.Pending, wantPending)
		}
		for i, w := range wantPending { // tool order: post_public_update < send_customer_email
			if g := o.Pending[i]; g.Tool != w.Tool || g.Pending != w.Pending || !g.Oldest.Equal(w.Oldest) {
				t.Errorf("pending %d: %+v, want %+v", i, g, w)
			}
		}
		if o.PendingTotal != 3 || o.OldestPending == nil || !o.OldestPending.Equal(now.Add(-10*d)) {
			t.Errorf("pending total %d, oldest %v; want 3 and %v", o.PendingTotal, o.OldestPending, now.Add(-10*d))
		}
		if o.Decisions24h != 2 {
			t.Errorf("decisions in 24 h = %d, want 2", o.Decisions24h)
		}
		if o.OpenTickets != 1 {
			t.Errorf("open tickets = %d, want 1", o.OpenTickets)
		}
		// A: 10, 20, 30, 40, 60 minutes: ranks 3 and 5. B: 1 h and 2 h:
		// ranks 1 and 2.
		wantTimes := []queue.ToolDecisionTimes{{Tool: toolB, Decisions: 2, P50: h, P90: 2 * h},
			{Tool: toolA, Decisions: 5, P50: 30 * time.Minute, P90: h}}
		if len(o.DecisionTimes) != len(wantTimes) {
			t.Fatalf("decision times %+v, want %+v", o.DecisionTimes, wantTimes)
		}
		for i, w := range wantTimes {
			if g := o.DecisionTimes[i]; g != w {
				t.Errorf("decision times %d: %+v, want %+v", i, g, w)
			}
		}
		// Hours from 2031-03-21 10:00 to 2031-03-22 09:00 UTC.
		first := time.Date(2031, 3, 21, 10, 0, 0, 0, time.UTC)
		want := map[int][2]int64{3: {1, 0}, 18: {1, 0}, 19: {0, 1}, 20: {1, 0}, 21: {2, 0}, 22: {1, 1}}
		if len(o.Hours) != queue.OverviewHours {
			t.Fatalf("%d hours, want %d", len(o.Hours), queue.OverviewHours)
		}
		for i, g := range o.Hours {
			w := want[i]
			if !g.Hour.Equal(first.Add(time.Duration(i)*h)) || g.Submitted != w[0] || g.Decided != w[1] {
				t.Errorf("hour %d: %s %d submitted %d decided; want %s %d %d", i, g.Hour, g.Submitted, g.Decided,
					first.Add(time.Duration(i)*h), w[0], w[1])
			}
		}
	}},
	// An empty store: zeros, no oldest, and still 24 hours to draw.
	{"Empty", func(t *testing.T, s Store) {
		o, err := queue.ReadOverview(t.Context(), s, t0, nil)
		noErr(t, err, "overview")
		if len(o.Pending) != 0 || o.OldestPending != nil || o.Decisions24h != 0 || len(o.DecisionTimes) != 0 ||
			o.OpenTickets != 0 || len(o.Hours) != queue.OverviewHours {
			t.Fatalf("empty overview: %+v", o)
		}
	}},
	// The rollup reads only the hours that may still change, and agrees
	// with a full read on every one of them.
	{"HourlyRollup", func(t *testing.T, s Store) {
		spy := &hourlySpy{Store: s}
		now := at(8 * 24 * time.Hour) // 09:26:53: the hour before ended 26 minutes ago
		n := 0
		add := func(created time.Time) {
			n++
			submitNew(t, s, classify.AtMostOnce, "send_customer_email", fmt.Sprintf("roll:%d", n), created)
		}
		for _, ago := range []time.Duration{20 * time.Hour, 5 * time.Hour, 50 * time.Minute, 10 * time.Minute} {
			add(now.Add(-ago))
		}
		var r queue.HourlyRollup
		hoursOf := func(now time.Time, rollup *queue.HourlyRollup, st queue.Reader) []queue.HourCount {
			t.Helper()
			o, err := queue.ReadOverview(t.Context(), st, now, rollup)
			noErr(t, err, "overview")
			return o.Hours
		}
		first := now.Truncate(time.Hour).Add(-(queue.OverviewHours - 1) * time.Hour)
		if got, want := hoursOf(now, &r, spy), hoursOf(now, nil, s); !slices.Equal(got, want) {
			t.Fatalf("first read with a rollup:\n%v\nwant\n%v", got, want)
		}
		if len(spy.since) != 1 || !spy.since[0].Equal(first) {
			t.Fatalf("the first read asked for hours since %v, want %v", spy.since, first)
		}
		// 40 minutes on (10:06:53): the 09:00 hour ended under HourSettle
		// ago, so it and the current hour are read again; everything
		// before them comes from the rollup.
		later := now.Add(40 * time.Minute)
		add(later.Add(-8 * time.Minute)) // 09:58:53, an hour that is not settled yet
		add(later.Add(-time.Minute))     // the current hour
		got, want := hoursOf(later, &r, spy), hoursOf(later, nil, s)
		if !slices.Equal(got, want) {
			t.Fatalf("second read with a rollup:\n%v\nwant\n%v", got, want)
		}
		if len(spy.since) != 2 || !spy.since[1].Equal(later.Truncate(time.Hour).Add(-time.Hour)) {
			t.Fatalf("the second read asked for hours since %v, want %v", spy.since, later.Truncate(time.Hour).Add(-time.Hour))
		}
		// A settled hour is kept as it was read: a row stamped into it now
		// (a clock more than HourSettle behind) shows only in a full read.
		add(now.Add(-40 * time.Minute)) // 08:46:53
		got, want = hoursOf(later, &r, spy), hoursOf(later, nil, s)
		eight := now.Truncate(time.Hour).Add(-time.Hour)
		sameBut := func(step string, got, want []queue.HourCount) {
			t.Helper()
			for i := range got {
				g, w := got[i], want[i]
				if g.Hour.Equal(eight) {
					w.Submitted--
				}
				if g != w {
					t.Errorf("%s, hour %v: %+v, want %+v", step, g.Hour, g, w)
				}
			}
		}
		sameBut("third read", got, want)
		// An hour that ended under HourSettle ago is read again: a row
		// stamped late into it (10:59, read at 11:06 and again at 11:08)
		// counts.
		last := later.Add(time.Hour)
		hoursOf(last, &r, spy)
		add(last.Truncate(time.Hour).Add(-time.Minute))
		sameBut("a late row in an hour not settled", hoursOf(last.Add(2*time.Minute), &r, spy), hoursOf(last.Add(2*time.Minute), nil, s))
	}},
	// Tickets settled by verifiers, and how long a person's waited: each
	// ticket opened and resolved at a known time, the windows' edges
	// crossed by one just outside, and a late report by the agent and an
	// open ticket counted by neither.
	{"TicketResolutions", func(t *testing.T, s Store) {
		now := at(8 * 24 * time.Hour)
		const h, d, m = time.Hour, 24 * time.Hour, time.Minute
		n := 0
		// open submits an exactly-once action whose claim (five minutes)
		// lapses at when, and opens its stale ticket then; tickets are
		// opened in time order, so each sweep opens only its own.
		open := func(when time.Time) *queue.Ticket {
			t.Helper()
			n++
			a := submitNew(t, s, classify.ExactlyOnce, "issue_refund", fmt.Sprintf("tr:%d", n), when.Add(-5*m))
			opened, err := s.TicketOpenStale(t.Context(), queue.StaleDue(when, 10))
			noErr(t, err, "open stale ticket")
			if len(opened) != 1 || opened[0].ActionID != a.ID {
				t.Fatalf("opened %+v at %v, want the ticket of %s alone", opened, when, a.ID)
			}
			return opened[0]
		}
		resolve := func(tk *queue.Ticket, by string, when time.Time) {
			t.Helper()
			p := resolveParams(tk.ID, queue.StateFailed, when)
			p.By = by
			if strings.HasPrefix(by, "verifier:") {
				p.Channel = queue.ChannelVerifier
			}
			_, err := s.TicketResolve(t.Context(), p)
			noErr(t, err, "resolve by "+by)
		}
		person, verifier := "user:ops@example.com", "verifier:issue_refund"
		// Eight days ago, after 12 hours: outside both windows.
		resolve(open(now.Add(-8*d)), person, now.Add(-8*d+12*h))
		// Three days ago, by people, after 30, 20 and 10 minutes.
		for i, took := range []time.Duration{30 * m, 20 * m, 10 * m} {
			opened := now.Add(-3*d - time.Duration(3-i)*h)
			resolve(open(opened), person, opened.Add(took))
		}
		// Two days ago, by a verifier.
		resolve(open(now.Add(-2*d-h)), verifier, now.Add(-2*d))
		// In the last day: a person after two hours; the agent's late
		// report; a verifier; and one still open.
		p4 := open(now.Add(-3 * h))
		late := open(now.Add(-2 * h))
		resolve(p4, person, now.Add(-h))
		_, err := s.ActionTransition(t.Context(), lateReport(late.ActionID, queue.StateDone, now.Add(-h)))
		noErr(t, err, "late report")
		resolve(open(now.Add(-h)), verifier, now.Add(-30*m))
		open(now.Add(-20 * m))

		o, err := queue.ReadOverview(t.Context(), s, now, nil)
		noErr(t, err, "overview")
		// 7 days: 10, 20, 30 minutes and 2 hours: ranks 2 and 4.
		if want := (queue.TicketResolutions{ByVerifier: 2, ByPerson: 4, WaitP50: 20 * m, WaitP90: 2 * h}); o.Tickets7d != want {
			t.Errorf("tickets in 7 days: %+v, want %+v", o.Tickets7d, want)
		}
		if want := (queue.TicketResolutions{ByVerifier: 1, ByPerson: 1, WaitP50: 2 * h, WaitP90: 2 * h}); o.Tickets24h != want {
			t.Errorf("tickets in 24 hours: %+v, want %+v", o.Tickets24h, want)
		}
		if o.OpenTickets != 1 {
			t.Errorf("open tickets = %d, want 1", o.OpenTickets)
		}
		empty, err := queue.ReadOverview(t.Context(), s, now.Add(10*d), nil)
		noErr(t, err, "overview ten days on")
		if empty.Tickets7d != (queue.TicketResolutions{}) || empty.Tickets24h != (queue.TicketResolutions{}) {
			t.Errorf("ten days on: %+v and %+v, want zeros", empty.Tickets24h, empty.Tickets7d)
		}
	}},
}

// hourlySpy records the bounds of the chart's reads on the real store.
type hourlySpy struct {
	Store
	since []time.Time
}

func (s *hourlySpy) ActionHourly(ctx context.Context, p queue.PeriodParams) ([]queue.HourCount, error) {
	s.since = append(s.since, p.Since)
	return s.Store.ActionHourly(ctx, p)
}
