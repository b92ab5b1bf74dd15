package app

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/approvals/approvals/tracing"
)

// flushTimeout bounds the sending of the last spans at exit.
const flushTimeout = 5 * time.Second

// StartTracing turns OpenTelemetry tracing on when the standard OTEL_*
// variables ask for it (tracing.Setup): then log's lines written with a
// context name their trace and span. stop flushes the spans not yet sent;
// the process calls it once it has served its last request.
func StartTracing(ctx context.Context, log *slog.Logger) (_ *slog.Logger, stop func(), err error) {
	shutdown, err := tracing.Setup(ctx, os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	if !tracing.Enabled() {
		return log, func() {}, nil
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	log.Info("tracing on: spans go to the OTLP endpoint of the OTEL_* environment")
	return log, func() {
		fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			log.Warn("tracing: could not flush the last spans", "err", err)
		}
	}, nil
}
