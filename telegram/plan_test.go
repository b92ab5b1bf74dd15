package telegram_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/telegram/telegramtest"
)

func (e *env) propose(steps ...[2]string) *queue.Plan {
	e.t.Helper()
	var req []queue.PlanStepRequest
	for _, s := range steps {
		req = append(req, queue.PlanStepRequest{Tool: s[0], Payload: []byte(`{"slug":"` + s[1] + `","text":"Hello ` + s[1] + `"}`)})
	}
	res, err := e.svc.Plans().Propose(context.Background(), queue.PlanRequest{Title: "Launch <week>", Steps: req, Agent: "bot", Channel: "api"})
	if err != nil || res.Plan.State != queue.PlanPending {
		e.t.Fatalf("propose: %v", err)
	}
	return res.Plan
}

// planMessage delivers and returns the message sent for the plan.
func (e *env) planMessage(pl *queue.Plan) telegramtest.Call {
	e.t.Helper()
	e.deliver()
	for _, c := range e.bot.Calls("sendMessage") {
		if slices.ContainsFunc(c.Buttons(), func(b string) bool { return strings.Contains(b, "/plans/"+pl.ID) }) {
			return c
		}
	}
	e.t.Fatalf("no message for plan %s", pl.ID)
	return telegramtest.Call{}
}

func (e *env) plan(id string) *queue.Plan {
	e.t.Helper()
	pl, err := e.svc.Plans().Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return pl
}

// A plan's message lists its steps; Approve decides the plan once (as the dashboard would:
// an approver outside a step's group is refused), and the message is then edited; a plan
// not shown whole offers only the link to decide on the plan page.
func TestTelegramPlan(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		pl := e.propose([2]string{"post_update", "alpha"}, [2]string{"post_update", "beta"})
		msg := e.planMessage(pl)
		for _, want := range []string{"Plan approval needed", "Launch &lt;week&gt;", "<b>Step 1</b> · <code>post_update</code>", "Hello alpha", "<b>Step 2</b>", "Hello beta", "Needs 1 approval(s)"} {
			if !strings.Contains(msg.Text(), want) {
				t.Errorf("message lacks %q:\n%s", want, msg.Text())
			}
		}
		want := []string{"Approve plan=approve:plan:" + pl.ID, "Open (reject there)→https://approvals.example.com/plans/" + pl.ID}
		if got := msg.Buttons(); !slices.Equal(got, want) {
			t.Fatalf("buttons %v, want %v", got, want)
		}
		if told := e.press(out, msg, "approve:plan:"+pl.ID); !strings.Contains(told, "not among the approvers of every step") {
			t.Fatalf("an approver outside the group: told %q", told)
		}
		if got := e.plan(pl.ID); got.State != queue.PlanPending || len(got.Approvals) != 0 {
			t.Fatalf("a refused approval changed the plan: %s %+v", got.State, got.Approvals)
		}
		if told := e.press(ann, msg, "approve:plan:"+pl.ID); told != "Plan approved." {
			t.Fatalf("told %q", told)
		}
		if told := e.press(ann, msg, "approve:plan:"+pl.ID); !strings.Contains(told, "approved this plan already") {
			t.Fatalf("a second press: told %q", told)
		}
		got := e.plan(pl.ID)
		if got.State != queue.PlanApproved || len(got.Approvals) != 1 || got.Approvals[0].Note != "via Telegram" {
			t.Fatalf("after Approve: %s %+v", got.State, got.Approvals)
		}
		e.deliver()
		if text := e.bot.Text(chatID, msg.MessageID); !strings.Contains(text, "<b>Plan approved</b> by ann@example.com") {
			t.Fatalf("the message says:\n%s", text)
		}

		hidden := e.propose([2]string{"post_update", "one"}, [2]string{"post_note", "two"})
		var many [][2]string
		for i := range 30 {
			many = append(many, [2]string{"post_comment", fmt.Sprintf("s%d-%s", i, strings.Repeat("x", 90))})
		}
		big := e.propose(many...)
		for _, tc := range []struct {
			pl   *queue.Plan
			want string
		}{{hidden, "step 2: 1 more field (slug)"}, {big, "more than a Telegram message holds"}} {
			m := e.planMessage(tc.pl)
			if got := m.Buttons(); len(got) != 1 || !strings.HasPrefix(got[0], "Open the plan to decide→") {
				t.Errorf("buttons %v, want only the link to the plan", got)
			}
			if !strings.Contains(m.Text(), tc.want) || len([]rune(m.Text())) > 4096 {
				t.Errorf("message (%d characters) does not say %q:\n%s", len([]rune(m.Text())), tc.want, m.Text())
			}
			if told := e.press(ann, m, "approve:plan:"+tc.pl.ID); !strings.Contains(told, "does not show all of this plan") {
				t.Errorf("Approve of a plan not shown whole: told %q", told)
			}
			if got := e.plan(tc.pl.ID); got.State != queue.PlanPending {
				t.Errorf("plan %s is %s", tc.pl.ID, got.State)
			}
		}
	})
}

// A pending plan the sweep expires (two sweepers racing) has its message edited once to say
// it expired, with no Approve button.
func TestTelegramPlanExpired(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, e *env) {
		pl := e.propose([2]string{"post_update", "alpha"})
		msg := e.planMessage(pl)
		if len(msg.Buttons()) != 2 {
			t.Fatalf("buttons %v, want Approve and the link", msg.Buttons())
		}
		e.app.Clock.Advance(queue.DefaultPlanExpiry + time.Minute)
		sweepers := []*maintenance.Sweeper{e.app.Sweeper(), e.app.AddProcess().Sweeper()}
		var wg sync.WaitGroup
		errs := make([]error, len(sweepers))
		for i, s := range sweepers {
			wg.Go(func() { _, errs[i] = s.Sweep(context.Background()) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		e.deliver()
		e.deliver()
		var edits []telegramtest.Call
		for _, c := range e.bot.Calls("editMessageText") {
			if fmt.Sprint(c.Params["message_id"]) == fmt.Sprint(msg.MessageID) {
				edits = append(edits, c)
			}
		}
		if len(edits) != 1 {
			t.Fatalf("%d edits of the plan's message, want 1", len(edits))
		}
		if text := e.bot.Text(chatID, msg.MessageID); !strings.Contains(text, "<b>Plan expired</b>") {
			t.Fatalf("the message says:\n%s", text)
		}
		if b := edits[0].Buttons(); slices.ContainsFunc(b, func(s string) bool { return strings.HasPrefix(s, "Approve") }) {
			t.Fatalf("the edited message keeps %v", b)
		}
	})
}
