package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/tracing"
)

// discardExporter takes spans and sends them nowhere: the cost measured is
// the server's (spans made, batched, the traceparent kept), not a network's.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkSubmitRESTTraced is BenchmarkSubmitREST with tracing on, every
// request sampled and carrying an agent's traceparent: the cost of tracing
// a submission (docs/operations.md, Tracing). Compare with
// BenchmarkSubmitREST/bench_exactly_once.
//
//	go test ./handlers -run '^$' -bench 'SubmitREST' -benchtime 5000x
func BenchmarkSubmitRESTTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tracing.Use(tp)
	b.Cleanup(func() {
		tracing.Use(nil)
		_ = tp.Shutdown(context.Background())
	})
	a := apptest.Start(b, apptest.Options{Tools: apptest.ParseTools(b, `
tools:
  bench_exactly_once:
    class: exactly-once
    description: Benchmark tool; the caller supplies the intent key.
`, classify.Options{})})
	token := "Bearer " + a.Token(b, "bench")
	h := a.Server.Handler()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			body := fmt.Appendf(nil, `{"tool":"bench_exactly_once","intent_key":"bench:%d","payload":{"n":%d,"to":"ann@example.com"}}`, i, i)
			req := httptest.NewRequest(http.MethodPost, "/api/v1/actions", bytes.NewReader(body))
			req.Header.Set("Authorization", token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated {
				b.Errorf("submit: %d %s", rec.Code, rec.Body)
				return
			}
		}
	})
}
