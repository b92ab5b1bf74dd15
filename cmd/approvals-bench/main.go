// Command approvals-bench is the load generator of scripts/bench: it drives
// a running approvals server on a loopback address and prints throughput
// and latency (docs/performance.md). It is a command of its own so that
// the server binary carries none of it.
package main

import (
	"context"
	"io"
	"os"

	"github.com/approvals/approvals/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: tests call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Exit("approvals-bench", benchCmd(ctx, args, stdout), benchUsage, stdout, stderr)
}

// env reads a setting from the environment.
func env(name string) string { return os.Getenv(name) }
