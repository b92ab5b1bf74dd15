package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/cli"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
	"github.com/approvals/approvals/upstream"
	"github.com/approvals/approvals/verifier"
)

// verifyCmd is "approvals verify test TOOLS_FILE ACTION_ID…": it asks the
// file's verifiers about stored actions and prints each verdict, reason and
// answer, writing nothing (docs/verifiers.md, "Trying it").
func verifyCmd(ctx context.Context, args []string, stdout io.Writer) error {
	const use = "usage: approvals verify test TOOLS_FILE ACTION_ID…"
	if len(args) == 0 || args[0] != "test" {
		return errors.New(use)
	}
	var c config
	fs := cli.NewFlags("verify test")
	dbFlags(fs, &c)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return errors.New("name a tools file and at least one action id: " + use)
	}
	path, ids := fs.Arg(0), fs.Args()[1:]
	secret, err := secretEnv("APPROVALS_WEBHOOK_SECRET")
	if err != nil {
		return err
	}
	opts := policyTestOptions()
	reg, err := classify.Load(path, opts)
	if err != nil {
		return err
	}
	vc := verifier.Config{Secret: secret}
	if ups := reg.Upstreams(); len(ups) > 0 {
		m := upstream.Start(ctx, ups, upstream.Options{})
		defer m.Close()
		vc.Upstream = m
		// As the server does: a verifier's upstream tool that is missing
		// or not read-only is never called (tools check's refusal); the
		// check answers unknown, saying why. The tools the upstreams list
		// are imported first, as tools check does: one classed
		// at-least-once counts as read-only.
		vc.Refuse = func(tool string) error {
			listings := m.Listings()
			imported, err := reg.Import(listings)
			if err != nil {
				return err
			}
			return imported.VerifierUpstreamProblem(tool, listings)
		}
	}
	asker, err := verifier.New(vc)
	if err != nil {
		return err
	}
	st, _, err := app.OpenStore(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	var r queue.Reader = st // reads only
	for _, id := range ids {
		a, err := r.ActionGetByID(ctx, id)
		if err != nil {
			return fmt.Errorf("action %s: %w", id, err)
		}
		tool, _ := reg.Lookup(a.Tool)
		if !tool.HasVerifier() {
			fmt.Fprintf(stdout, "%s  %s  %s: the tool has no verifier in %s\n", a.ID, a.Tool, a.State, path)
			continue
		}
		out, answer := queue.AskVerifier(ctx, asker, tool, a, time.Now().UTC())
		fmt.Fprintf(stdout, "%s  %s  %s: %s (%s)\n", a.ID, a.Tool, a.State, out.Verdict, out.Reason)
		if len(answer) > 0 {
			fmt.Fprintf(stdout, "  answer: %s\n", templates.PrettyJSON(answer))
		}
		if out.Verdict == classify.VerdictDone {
			fmt.Fprintf(stdout, "  result: %s\n", templates.PrettyJSON(out.Result))
		}
	}
	return nil
}
