package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
)

// benchTools are two at-most-once tools alike but for the policy: plain has
// no rules, ruled has three that never match and takes grants.
const benchTools = `
tools:
  plain:
    intent: "plain:{n}"
  ruled:
    intent: "ruled:{n}"
    approval:
      policy:
        - { name: internal, when: 'payload.to.endsWith("@example.com")', decide: approve }
        - { name: legal, when: 'payload.topic in ["legal", "lawsuit"]', decide: reject, note: "no" }
        - { name: vip, when: 'payload.customer_id.startsWith("vip-")' }
      grants: { max: 8h }
`

// BenchmarkSubmitPolicy compares new submissions of a tool without rules
// with those of a tool with three rules and one active grant (which holds
// another customer fixed, so it is looked up and never matches), through
// the Service on each store, from concurrent goroutines:
//
//	go test ./queue -run '^$' -bench SubmitPolicy -benchtime 3000x
//
// It is a yardstick for a change, not the benchmark of docs/performance.md
// (scripts/bench, through HTTP, against pgbench).
func BenchmarkSubmitPolicy(b *testing.B) {
	for _, store := range []string{"postgres", "sqlite"} {
		e := apptest.NewEnv(b, apptest.EnvOptions{SQLite: store == "sqlite", Tools: apptest.ParseTools(b, benchTools, classify.Options{})})
		apptest.AddStaff(b, e.Store, strings.TrimPrefix(apptest.Approver, "user:"), accounts.RoleApprover)
		granting := apptest.Submit(b, e.Service, "ruled", map[string]any{"n": "g", "customer_id": "c-grant", "topic": "t", "to": "x@customer.org"})
		if _, err := e.Service.Decide(context.Background(), queue.DecideRequest{ID: granting.ID, To: queue.StateApproved, By: apptest.Approver,
			Grant: &queue.GrantRequest{For: 8 * time.Hour, Fields: []string{"customer_id"}}}); err != nil {
			b.Fatal(err)
		}
		var n atomic.Int64
		for _, tool := range []string{"plain", "ruled"} {
			b.Run(store+"/"+tool, func(b *testing.B) {
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						raw, _ := json.Marshal(map[string]any{"n": fmt.Sprint(n.Add(1)), "customer_id": "c-42", "topic": "welcome",
							"to": "ada@customer.org", "subject": "Hi", "body": "Hello"})
						res, err := e.Service.Submit(context.Background(), queue.SubmitRequest{Tool: tool, Payload: raw, Agent: "bot"})
						if err != nil || !res.Created || res.Action.State != queue.StatePending {
							b.Errorf("submit: %v %+v", err, res)
							return
						}
					}
				})
			})
		}
	}
}
