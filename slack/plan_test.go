package slack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/maintenance"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/slack/slacktest"
)

// propose stores a plan of agent bot whose steps are (tool, slug) pairs.
func (e *slackEnv) propose(steps ...[2]string) *queue.Plan {
	e.t.Helper()
	var req []queue.PlanStepRequest
	for _, s := range steps {
		req = append(req, queue.PlanStepRequest{Tool: s[0], Payload: []byte(`{"slug":"` + s[1] + `","text":"Hello ` + s[1] + `"}`)})
	}
	res, err := e.svc.Plans().Propose(context.Background(), queue.PlanRequest{Title: "Launch week", Steps: req, Agent: "bot", Channel: "api"})
	if err != nil {
		e.t.Fatal(err)
	}
	if res.Plan.State != queue.PlanPending {
		e.t.Fatalf("plan is %s, want pending", res.Plan.State)
	}
	return res.Plan
}

func (e *slackEnv) plan(id string) *queue.Plan {
	e.t.Helper()
	pl, err := e.svc.Plans().Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return pl
}

// planButtons are the action_id=value pairs of a posted message's buttons, with the URL of a
// link button.
func planButtons(c slacktest.Call) []string {
	var out []string
	for _, b := range c.Blocks() {
		els, _ := b["elements"].([]any)
		for _, el := range els {
			m, _ := el.(map[string]any)
			if m["type"] != "button" {
				continue
			}
			s := fmt.Sprintf("%v=%v", m["action_id"], m["value"])
			if u, ok := m["url"].(string); ok {
				s += " " + u
			}
			out = append(out, s)
		}
	}
	return out
}

// A pending plan's message lists every step with its preview, the quorum and the link; an
// approval pressed in Slack decides the plan once (a repeat is a replay), through the
// dashboard's path, and every message of the plan is then updated without buttons.
func TestSlackPlanMessageListsStepsAndApprovesOnce(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		pl := e.propose([2]string{"post_update", "alpha"}, [2]string{"post_update", "beta"})
		e.deliver()
		posts := e.slack.Calls("chat.postMessage")
		if len(posts) != 2 {
			t.Fatalf("%d messages posted, want one per channel of the steps' rule (2)", len(posts))
		}
		blocks := posts[0].Form.Get("blocks")
		for _, want := range []string{"Step 1", "Step 2", "`post_update`", "Hello alpha", "Hello beta", "at-most-once", "human",
			"needs 1 approval(s)", "https://approvals.example.com/plans/" + pl.ID} {
			if !strings.Contains(blocks, want) {
				t.Errorf("the plan's message lacks %q: %s", want, blocks)
			}
		}
		if b := planButtons(posts[0]); len(b) != 3 || b[0] != "approve=plan:"+pl.ID {
			t.Fatalf("buttons %v, want Approve plan:%s first, then Reject and Request changes", b, pl.ID)
		}
		if status, body := e.press("U0ANN", "approve", "plan:"+pl.ID); status != http.StatusOK || body != "" {
			t.Fatalf("approve: %d %q", status, body)
		}
		got := e.plan(pl.ID)
		if got.State != queue.PlanApproved || got.DecidedBy == nil || *got.DecidedBy != "user:ann@example.com" ||
			len(got.Approvals) != 1 || got.Approvals[0].Note != "via Slack" {
			t.Fatalf("after approve in Slack: %s by %v, approvals %+v", got.State, got.DecidedBy, got.Approvals)
		}
		if status, _ := e.press("U0ANN", "approve", "plan:"+pl.ID); status != http.StatusOK {
			t.Fatalf("repeated approve: %d", status)
		}
		if r := e.ephemerals(); len(r) != 1 || !strings.Contains(r[0], "already") {
			t.Fatalf("replies %q, want one saying the approval was given already", r)
		}
		if again := e.plan(pl.ID); len(again.Approvals) != 1 || again.Version != got.Version {
			t.Fatalf("the repeated approval changed the plan: %+v (version %d, was %d)", again.Approvals, again.Version, got.Version)
		}
		e.deliver()
		updates := e.slack.Calls("chat.update")
		if len(updates) != 2 {
			t.Fatalf("%d updates, want both messages of the plan updated", len(updates))
		}
		for _, u := range updates {
			if !strings.Contains(u.Form.Get("blocks"), "Plan approved") || !strings.Contains(u.Form.Get("blocks"), "ann@example.com") || len(planButtons(u)) != 0 {
				t.Errorf("update %s: want who approved and no buttons", u.Form.Get("blocks"))
			}
		}
	})
}

// A plan whose message cannot show every step whole (a step's preview hides a field; too
// many steps) offers no Approve, only the link to decide on the plan page; Approve pressed
// anyway changes nothing.
func TestSlackPlanTooLargeOffersNoOneClick(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		hidden := e.propose([2]string{"post_update", "one"}, [2]string{"post_note", "two"})
		var many [][2]string
		for i := range 45 {
			many = append(many, [2]string{"post_update", fmt.Sprintf("s%d", i)})
		}
		big := e.propose(many...)
		e.deliver()
		posts := e.slack.Calls("chat.postMessage")
		if len(posts) != 4 { // each plan: team-slack and leads-slack (post_update's rule)
			t.Fatalf("%d messages posted, want 4", len(posts))
		}
		for _, p := range posts {
			var want string
			switch {
			case strings.Contains(p.Form.Get("blocks"), "/plans/"+hidden.ID):
				want = "step 2: 1 more field (slug)"
			case strings.Contains(p.Form.Get("blocks"), "/plans/"+big.ID):
				want = "45 steps"
			default:
				t.Fatalf("a message of neither plan: %s", p.Form.Get("blocks"))
			}
			b := planButtons(p)
			if len(b) == 0 || !strings.HasPrefix(b[0], "review=plan:") || !strings.Contains(b[0], "/plans/") {
				t.Errorf("buttons %v, want the link to the plan first", b)
			}
			for _, s := range b {
				if strings.HasPrefix(s, "approve=") {
					t.Errorf("a plan not shown whole offers Approve: %v", b)
				}
			}
			if !strings.Contains(p.Form.Get("blocks"), want) || !strings.Contains(p.Form.Get("blocks"), "Open the plan to decide") {
				t.Errorf("message does not say %q is not shown: %s", want, p.Form.Get("blocks"))
			}
		}
		e.press("U0ANN", "approve", "plan:"+hidden.ID)
		if r := e.ephemerals(); len(r) != 1 || !strings.Contains(r[0], "does not show all") || !strings.Contains(r[0], "/plans/"+hidden.ID) {
			t.Fatalf("replies %q, want one saying what is not shown, with the link", r)
		}
		if got := e.plan(hidden.ID); got.State != queue.PlanPending || len(got.Approvals) != 0 {
			t.Fatalf("Approve on a plan not shown whole: %s, %d approvals", got.State, len(got.Approvals))
		}
	})
}

// Who may decide a plan from Slack is the dashboard's rule: an approver outside a human
// step's group, or a viewer, changes nothing and is told why; a rejection's note modal
// decides through Plans.Decide, and a quorum step makes the plan need two approvals.
func TestSlackPlanWhoMayDecide(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		pl := e.propose([2]string{"post_update", "gamma"}, [2]string{"double_check", "delta"})
		if pl.ApprovalsRequired != 2 {
			t.Fatalf("required %d, want the largest quorum of the human steps (2)", pl.ApprovalsRequired)
		}
		e.press("U0OUT", "approve", "plan:"+pl.ID)
		e.press("U0VIC", "approve", "plan:"+pl.ID)
		// Each press answers on its own goroutine: the replies come in
		// either order ("Nothing was changed: out@…" sorts before "vic@…").
		r := e.ephemerals()
		slices.Sort(r)
		if len(r) != 2 || !strings.Contains(r[0], "out@example.com is not among the approvers of every step") || !strings.Contains(r[1], "viewer") {
			t.Fatalf("replies %q, want the outsider and the viewer refused with the reason", r)
		}
		if got := e.plan(pl.ID); got.State != queue.PlanPending || len(got.Approvals) != 0 {
			t.Fatalf("refused approvals changed the plan: %s, %+v", got.State, got.Approvals)
		}
		e.press("U0ANN", "approve", "plan:"+pl.ID)
		if r := e.ephemerals(); len(r) != 3 || !strings.Contains(r[2], "counted: 1 of 2") {
			t.Fatalf("replies %q, want the first approval counted 1 of 2", r)
		}
		e.press("U0BOB", "reject", "plan:"+pl.ID)
		opens := e.slack.Calls("views.open")
		if len(opens) != 1 {
			t.Fatalf("%d modals opened, want 1", len(opens))
		}
		if view, _ := opens[0].JSON["view"].(map[string]any); view["private_metadata"] != "plan:"+pl.ID {
			t.Fatalf("modal %v, want private_metadata plan:%s", opens[0].JSON, pl.ID)
		}
		status, body := e.post(slacktest.NoteSubmission("U0OUT", "reject", "plan:"+pl.ID, "no"), time.Time{}, slackSecret)
		if status != http.StatusOK || !strings.Contains(body, "may not decide") {
			t.Fatalf("outsider's note: %d %s, want the refusal in the modal", status, body)
		}
		status, body = e.post(slacktest.NoteSubmission("U0BOB", "reject", "plan:"+pl.ID, "Not this week"), time.Time{}, slackSecret)
		if status != http.StatusOK || body != "" {
			t.Fatalf("note: %d %q", status, body)
		}
		got := e.plan(pl.ID)
		if got.State != queue.PlanRejected || got.DecisionNote == nil || *got.DecisionNote != "Not this week" || *got.DecidedBy != "user:bob@example.com" {
			b, _ := json.Marshal(got)
			t.Fatalf("after the note: %s", b)
		}
	})
}

// A pending plan the sweep expires (two sweepers racing) is told to the channels whose
// messages offered its buttons: each message is updated once to say it expired, without
// buttons, and a button pressed on the old message is refused.
func TestSlackPlanExpiredUpdatesMessages(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		pl := e.propose([2]string{"post_update", "alpha"})
		e.deliver()
		posts := e.slack.Calls("chat.postMessage")
		if len(posts) != 2 || len(planButtons(posts[0])) != 3 {
			t.Fatalf("%d messages posted, want 2 with buttons", len(posts))
		}
		e.app.Clock.Advance(queue.DefaultPlanExpiry + time.Minute)
		sweepRace(t, e.app)
		if got := e.plan(pl.ID); got.State != queue.PlanExpired {
			t.Fatalf("plan is %s after the sweep, want expired", got.State)
		}
		e.deliver()
		e.deliver()
		updates := e.slack.Calls("chat.update")
		if len(updates) != 2 {
			t.Fatalf("%d updates, want each of the 2 messages updated once", len(updates))
		}
		seen := map[string]bool{}
		for _, u := range updates {
			seen[u.Form.Get("channel")+" "+u.Form.Get("ts")] = true
			if !strings.Contains(u.Form.Get("blocks"), "Plan expired") || len(planButtons(u)) != 0 {
				t.Errorf("update %s: want the plan expired and no buttons", u.Form.Get("blocks"))
			}
		}
		if len(seen) != 2 {
			t.Fatalf("updates %v, want both messages", seen)
		}
		if status, _ := e.press("U0ANN", "approve", "plan:"+pl.ID); status != http.StatusOK {
			t.Fatalf("approve of an expired plan: %d", status)
		}
		if got := e.plan(pl.ID); got.State != queue.PlanExpired || len(got.Approvals) != 0 {
			t.Fatalf("a press on the old message changed the plan: %s %+v", got.State, got.Approvals)
		}
	})
}

// sweepRace runs the sweep of two processes at once.
func sweepRace(t *testing.T, app *apptest.Env) {
	t.Helper()
	sweepers := []*maintenance.Sweeper{app.Sweeper(), app.AddProcess().Sweeper()}
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
}

// What a plan's message does not show is cut as it is sent, escaped: steps whose hidden keys
// are all "&" ("&amp;" escaped) would make a section longer than Slack's 3000 characters, and
// Slack would refuse the plan's message (invalid_blocks).
func TestSlackPlanHiddenListFits(t *testing.T) {
	t.Parallel()
	slackStores(t, func(t *testing.T, e *slackEnv) {
		var steps []queue.PlanStepRequest
		for i := range 30 {
			steps = append(steps, queue.PlanStepRequest{Tool: "post_note",
				Payload: []byte(fmt.Sprintf(`{"slug":"s%d","text":"Hello","%s":1}`, i, strings.Repeat("&", 60)))})
		}
		res, err := e.svc.Plans().Propose(context.Background(), queue.PlanRequest{Title: "Launch week", Steps: steps, Agent: "bot", Channel: "api"})
		if err != nil {
			t.Fatal(err)
		}
		e.deliver()
		posts := e.slack.Calls("chat.postMessage")
		if len(posts) == 0 {
			t.Fatal("no message posted")
		}
		for _, p := range posts {
			for _, b := range p.Blocks() {
				text, _ := b["text"].(map[string]any)
				if s, _ := text["text"].(string); len([]rune(s)) > 3000 {
					t.Fatalf("plan %s: a section of %d characters, past Slack's 3000", res.Plan.ID, len([]rune(s)))
				}
			}
		}
	})
}
