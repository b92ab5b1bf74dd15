package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/approvals/approvals/claudecode"
)

// hookCmd is `approvals hook claude-code`: one hook invocation of Claude Code.
// A missing setting is answered on stdout (deny), not as a failure, so
// that Claude Code never reads a failed hook as permission.
func hookCmd(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 1 || args[0] != "claude-code" {
		return errors.New("usage: approvals hook claude-code (a PreToolUse or PostToolUse input on stdin)")
	}
	cfg, err := claudecode.ConfigFromEnv(os.Getenv)
	return claudecode.Run(ctx, cfg, err, stdin, stdout)
}
