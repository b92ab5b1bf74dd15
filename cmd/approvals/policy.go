package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/cli"
	"github.com/approvals/approvals/queue"
)

// policyCmd is approvals policy test [--since 720h] TOOLS_FILE: the rules
// of the file tried on the stored submissions of the window. It writes
// nothing.
func policyCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "test" {
		return errors.New("usage: approvals policy test [--since 720h] TOOLS_FILE")
	}
	var (
		c     config
		since time.Duration
	)
	fs := cli.NewFlags("policy test")
	dbFlags(fs, &c)
	fs.DurationVar(&since, "since", 720*time.Hour, "the window: submissions of the last ... (a Go duration)")
	// The file may come before or after the flags.
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("name one tools file: approvals policy test [--since 720h] TOOLS_FILE")
	}
	path := fs.Arg(0)
	if err := cli.ParseFlags(fs, fs.Args()[1:]); err != nil {
		return err
	}
	if since <= 0 {
		return fmt.Errorf("--since %s: the window must be longer than zero", since)
	}
	reg, err := classify.Load(path, policyTestOptions())
	if err != nil {
		return err
	}
	st, where, err := app.OpenStore(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now().UTC()
	var r queue.Reader = st // reads only
	rep, err := queue.ReplayPolicy(ctx, r, queue.PolicyReplayParams{Tools: reg, Since: now.Add(-since)})
	if err != nil {
		return err
	}
	writePolicyReplay(stdout, rep, path, where, since)
	return nil
}

// policyTestOptions load a tools file for its rules alone: the settings
// that only sending needs (Slack, SMTP, webhook secrets) need not be set,
// and a ${VAR} that is not set stands for a value of its own.
func policyTestOptions() classify.Options {
	return classify.Options{WebhookSecretSet: true, SlackConfigured: true, SMTPConfigured: true,
		LookupEnv: func(name string) (string, bool) {
			if v, ok := os.LookupEnv(name); ok {
				return v, true
			}
			return "unset:" + name, true
		}}
}

func writePolicyReplay(w io.Writer, rep queue.PolicyReplay, path, where string, since time.Duration) {
	fmt.Fprintf(w, "policy test of %s on %s: %d submissions of tools with a policy in the last %s\n",
		path, where, rep.Actions, classify.FormatDuration(since))
	if len(rep.Tools) == 0 {
		fmt.Fprintln(w, "no tool of the file has a policy")
	}
	for _, t := range rep.Tools {
		fmt.Fprintf(w, "%s\n", t.Tool)
		for _, r := range t.Rules {
			fmt.Fprintf(w, "  %-28s %-8s %d\n", r.Rule, r.Decision, r.Count)
		}
		fmt.Fprintf(w, "  %-28s %-8s %d\n", "(no rule)", "", t.None)
		if t.Errors > 0 {
			fmt.Fprintf(w, "  %-28s %-8s %d\n", "(a rule failed: policy_error)", "human", t.Errors)
		}
		if t.Held > 0 {
			fmt.Fprintf(w, "  %-28s %-8s %d\n", "(approve held: a warning)", "human", t.Held)
		}
	}
	if len(rep.Disagreements) == 0 {
		fmt.Fprintln(w, "people decided otherwise: none")
	} else {
		fmt.Fprintf(w, "people decided otherwise: %d\n", len(rep.Disagreements))
	}
	for _, d := range rep.Disagreements {
		verb := "approves"
		if d.Decision == classify.DecideReject {
			verb = "rejects"
		}
		fmt.Fprintf(w, "  %s %s: %s %s what %s %s\n", d.ActionID, d.Tool, d.Rule, verb, strings.TrimPrefix(d.By, "user:"), d.Did)
	}
	writePlansReplay(w, rep.Plans, since)
}

// writePlansReplay counts the window's plans as the rules would judge
// them, then lists each with its steps' routing, one line a step.
func writePlansReplay(w io.Writer, p queue.PlansReplay, since time.Duration) {
	fmt.Fprintf(w, "plans in the last %s: %d; %d would need a person, %d approved by rules, %d rejected by rules\n",
		classify.FormatDuration(since), p.Total, p.Human, p.Approved, p.Rejected)
	would := map[queue.PlanState]string{queue.PlanPending: "needs a person", queue.PlanApproved: "approved by rules",
		queue.PlanRejected: "rejected by rules"}
	for _, pl := range p.Each {
		fmt.Fprintf(w, "  plan %s %q (%s): %s", pl.ID, pl.Title, pl.Was, would[pl.Would])
		if pl.Did != "" {
			fmt.Fprintf(w, "; %s %s it", strings.TrimPrefix(pl.By, "user:"), pl.Did)
		}
		fmt.Fprintln(w)
		for _, st := range pl.Steps {
			rule := st.Rule
			if rule == "" {
				rule = "(no rule)"
			}
			fmt.Fprintf(w, "    step %d %-24s %-8s %s\n", st.N, st.Tool, st.Decision, rule)
		}
	}
}
