// Command approvals makes AI agents' side effects safe: see README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/approvals/approvals/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: approvals [command] [flags]

commands:
  serve                       run the server (the default)
  migrate                     apply database migrations and exit
  user add --email E --role R [--slack-id U123] [--telegram-id N] [--update]
                              create or update a staff user; password on stdin
  token create --name NAME    create an agent token; prints it once
  token revoke --name NAME    revoke an agent token
  tools check [FILE]          validate a tools file and show each tool's class
  telegram set-webhook        register {APPROVALS_PUBLIC_URL}/integrations/telegram/webhook
                              with Telegram, with APPROVALS_TELEGRAM_SECRET
  audit keygen                print a new APPROVALS_AUDIT_KEY and its public key
  audit export [--since SEQ] [--out FILE]
                              write the sealed events as JSON Lines with a signed checkpoint
  audit verify [FILE --public-key KEY [--after PREVIOUS_EXPORT]]
                              check the audit chain in the database, or an export offline
  policy test [--since 720h] FILE
                              try the file's policy rules on the stored submissions of the
                              window: what each rule would have decided, and where people
                              decided otherwise; writes nothing
  verify test FILE ACTION_ID…
                              ask the file's verifiers about stored actions and print each
                              verdict, reason and answer; writes nothing
  hook claude-code            Claude Code PreToolUse/PostToolUse hook (APPROVALS_URL,
                              APPROVALS_TOKEN, APPROVALS_HOOK_WAIT; JSON on stdin)

Configuration (flags override environment): DATABASE_URL (--database-url),
APPROVALS_ADDR (--addr), APPROVALS_TOOLS (--tools), APPROVALS_WEBHOOK_SECRET,
APPROVALS_SESSION_SECRET, APPROVALS_SWEEP_INTERVAL, APPROVALS_MAX_BODY,
APPROVALS_PPROF_ADDR (loopback only), APPROVALS_PUBLIC_URL (the base of links
sent out), APPROVALS_SLACK_BOT_TOKEN, APPROVALS_SLACK_SIGNING_SECRET,
APPROVALS_SLACK_API_URL, APPROVALS_SMTP_URL, APPROVALS_SMTP_FROM,
APPROVALS_TELEGRAM_BOT_TOKEN, APPROVALS_TELEGRAM_SECRET, APPROVALS_TELEGRAM_API_URL,
APPROVALS_PAGERDUTY_URL, APPROVALS_AUDIT_LEASE, APPROVALS_AUDIT_KEY (audit export),
APPROVALS_AUDIT_PUBLIC_KEY (audit verify). Secrets may come from a file named by NAME_FILE
(APPROVALS_WEBHOOK_SECRET_FILE, APPROVALS_SESSION_SECRET_FILE,
APPROVALS_SLACK_BOT_TOKEN_FILE, APPROVALS_SLACK_SIGNING_SECRET_FILE,
APPROVALS_SMTP_URL_FILE, APPROVALS_TELEGRAM_BOT_TOKEN_FILE,
APPROVALS_TELEGRAM_SECRET_FILE, APPROVALS_OIDC_CLIENT_SECRET_FILE, APPROVALS_AUDIT_KEY_FILE).
`

// run is main without the process: tests call it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd, named := "serve", false
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args, named = args[0], args[1:], true
	}
	if known(cmd) && wantsHelp(args) {
		if named {
			fmt.Fprint(stdout, commandUsage(cmd))
		} else {
			fmt.Fprint(stdout, usage) // approvals --help
		}
		return 0
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(ctx, args, stderr)
	case "migrate":
		err = migrateCmd(ctx, args, stdout)
	case "user":
		err = userCmd(ctx, args, stdin, stdout)
	case "token":
		err = tokenCmd(ctx, args, stdout)
	case "tools":
		err = toolsCmd(ctx, args, stdout)
	case "policy":
		err = policyCmd(ctx, args, stdout)
	case "verify":
		err = verifyCmd(ctx, args, stdout)
	case "hook":
		err = hookCmd(ctx, args, stdin, stdout)
	case "telegram":
		err = telegramCmd(ctx, args, stdout)
	case "audit":
		err = auditCmd(ctx, args, stdout, stderr)
	case "help", "-h", "--help":
		if len(args) > 0 && known(args[0]) {
			fmt.Fprint(stdout, commandUsage(args[0]))
			return 0
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "approvals: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	return cli.Exit("approvals "+cmd, err, usage, stdout, stderr)
}

// known says whether cmd is one of run's commands.
func known(cmd string) bool {
	switch cmd {
	case "serve", "migrate", "user", "token", "tools", "policy", "verify", "hook", "telegram", "audit":
		return true
	}
	return false
}
