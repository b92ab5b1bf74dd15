package maintenance_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/maintenance"
)

// Two processes' sealers run on one database: one holds the lease and
// seals what is submitted within a second; when it stops it gives the
// lease up, and the other takes over at once rather than after the lease.
func TestSealerRunsAndHandsOver(t *testing.T) {
	t.Parallel()
	apptest.OnBothStores(t, apptest.EnvOptions{}, func(t *testing.T, e *apptest.Env) {
		other := e.AddProcess()
		// A lease far longer than the test: a handover within it can only
		// be the release.
		cfg := maintenance.SealerConfig{Lease: time.Hour, Interval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
		first, second := maintenance.NewSealer(e.Store, cfg), maintenance.NewSealer(other.Store, cfg)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { first.Run(ctx); close(done) }()
		defer func() { stop(); <-done }()

		sealed := func(within time.Duration) {
			t.Helper()
			deadline := time.Now().Add(within)
			for {
				n, err := e.Store.AuditUnsealedCount(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d events unsealed after %s", n, within)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		e.Submit("send_customer_email", apptest.EmailBody("c-1", "welcome")["payload"].(map[string]any))
		sealed(10 * time.Second) // the first round may wait for other tests' transactions
		head, err := e.Store.AuditHeadGet(t.Context())
		if err != nil || head.Holder != first.Holder() || head.Seq != 1 {
			t.Fatalf("head after the first sealer's rounds: %+v, %v", head, err)
		}
		res, err := second.Seal(t.Context())
		if err != nil || res.Holding {
			t.Fatalf("the second sealer while the first holds the lease: %+v, %v", res, err)
		}

		stop()
		<-done
		head, err = e.Store.AuditHeadGet(t.Context())
		if err != nil || head.LeaseLeft > 0 {
			t.Fatalf("the lease after the first sealer stopped: %+v, %v", head, err)
		}
		ctx2, stop2 := context.WithCancel(context.Background())
		done2 := make(chan struct{})
		go func() { second.Run(ctx2); close(done2) }()
		defer func() { stop2(); <-done2 }()
		other.Submit("send_customer_email", apptest.EmailBody("c-2", "welcome")["payload"].(map[string]any))
		sealed(10 * time.Second)
		head, err = e.Store.AuditHeadGet(t.Context())
		if err != nil || head.Holder != second.Holder() || head.Seq != 2 {
			t.Fatalf("head after the handover: %+v, %v", head, err)
		}
	})
}
