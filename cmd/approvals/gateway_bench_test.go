package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/postgres/pgtest"
)

// BenchmarkGatewayOverhead is issue 29's gateway measure: one
// at-least-once call (the upstream's read-only "lookup") through an
// `approvals serve` process's /mcp, which records the call, calls the
// upstream and stores its answer, against the same call made straight to
// the upstream with the Go SDK's client. Each sub-benchmark reports the
// median call (p50-us) beside the mean; the overhead is the difference of
// the two medians (target < 2 ms). The store's durability is
// TEST_DATABASE_URL's: point it at a cluster with fsync on (scripts/bench's)
// for the figure that counts.
func BenchmarkGatewayOverhead(b *testing.B) {
	pgtest.BaseURL(b)
	bin := apptest.BuildBinary(b)
	up := newGatewayUpstream(b)
	d := apptest.NewDeployment(b, bin, apptest.DeploymentOptions{Tools: fmt.Sprintf(`
upstreams:
  crm:
    url: %s/mcp
    import: all
    trust_annotations: true
`, up.srv.URL)})
	p := d.Start()
	connect := func(endpoint string, rt http.RoundTripper) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	for _, bc := range []struct {
		name, tool string
		cs         *mcp.ClientSession
	}{
		{"direct", "lookup", connect(up.srv.URL+"/mcp", http.DefaultTransport)},
		{"through_approvals", "crm_lookup", connect(p.URL+"/mcp", bearer{d.Token})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var took []time.Duration
			i := 0
			for b.Loop() {
				i++
				start := time.Now()
				res, err := bc.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: bc.tool,
					Arguments: map[string]any{"order": fmt.Sprint("o-", i)}})
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %+v", bc.tool, err, res)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-us")
		})
	}
}
