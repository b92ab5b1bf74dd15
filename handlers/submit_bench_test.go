package handlers_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
)

// BenchmarkSubmitREST is a new submission through the server's whole
// handler (echo, the middleware, the token's hot path, the service, the
// PostgreSQL store and its batcher), in process, from concurrent
// goroutines, without the network: what the server allocates for one
// request beyond net/http's own reading and writing. Allocations do not
// depend on what else the machine is doing, so this is the figure to
// compare two trees by where CPU time on a shared machine cannot tell
// them apart (docs/performance.md, round 3); scripts/bench stays the
// measure of throughput and CPU. The request and its recorder, built
// here, count too (a handful of allocations, the same in every tree).
//
//	go test ./handlers -run '^$' -bench SubmitREST -benchtime 5000x
func BenchmarkSubmitREST(b *testing.B) {
	a := apptest.Start(b, apptest.Options{Tools: apptest.ParseTools(b, `
tools:
  bench_exactly_once:
    class: exactly-once
    description: Benchmark tool; the caller supplies the intent key.
`, classify.Options{})})
	token := "Bearer " + a.Token(b, "bench")
	h := a.Server.Handler()
	var n atomic.Int64 // every run of every sub-benchmark submits new intents
	for _, tool := range []string{"bench_exactly_once", "bench_unregistered"} {
		b.Run(tool, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					body := fmt.Appendf(nil, `{"tool":%q,"intent_key":"bench:%d","payload":{"n":%d,"to":"ann@example.com"}}`, tool, i, i)
					req := httptest.NewRequest(http.MethodPost, "/api/v1/actions", bytes.NewReader(body))
					req.Header.Set("Authorization", token)
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusCreated {
						b.Errorf("submit %s: %d %s", tool, rec.Code, rec.Body)
						return
					}
				}
			})
		})
	}
}
