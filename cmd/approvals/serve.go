package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/approvals/approvals/internal/app"
)

// serve runs the server until SIGTERM or SIGINT: then it stops accepting and
// claiming, lets in-flight requests and deliveries finish, closes storage
// and returns nil (exit 0).
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, err := parseServeConfig(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	log, stopTracing, err := app.StartTracing(ctx, log)
	if err != nil {
		return err
	}
	// After the last request and delivery: their spans go out too.
	defer stopTracing()
	tuneGC()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// After the first signal, a second one ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	cfg.Logger = log
	return app.Run(ctx, cfg.Config, ln)
}

// tuneGC trades memory the server does not use for CPU it does: its live
// heap is small (about 10 MiB under load), so the default GOGC=100 collects
// very often; under the write benchmark the collector took about 15% of the
// server's CPU. GOGC=400 lets the heap grow to five times the live data. A
// soft limit of 192 MiB caps that trade: the heap goal counts goroutine
// stacks, so ten thousand long-polls (about 75 MiB of heap and stacks)
// would otherwise let garbage grow past 300 MiB before a collection, and
// with the limit a collection comes first (issue 29: RSS 206 against
// 264-297 MiB, submissions beside them unchanged). Under the submission
// load the heap stays far below it. GOGC and GOMEMLIMIT in the environment
// win.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}

// defaultMemoryLimit is the soft memory limit of tuneGC.
const defaultMemoryLimit = 192 << 20

// loopback reports whether addr ("host:port") is on a loopback interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
