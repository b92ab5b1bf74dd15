package longpoll_test

import (
	"strings"
	"testing"

	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
)

// TestAcquireWaiter: the per-holder and total caps hold, a release frees a
// slot once however often it is called, and a refusal says which cap.
func TestAcquireWaiter(t *testing.T) {
	t.Parallel()
	svc := longpoll.New(nil, longpoll.Options{Waiters: longpoll.WaiterLimits{Total: 3, PerHolder: 2}})
	must := func(holder string) func() {
		t.Helper()
		release, err := svc.AcquireWaiter(holder)
		if err != nil {
			t.Fatalf("acquire for %s: %v", holder, err)
		}
		return release
	}
	refused := func(holder, says string) {
		t.Helper()
		_, err := svc.AcquireWaiter(holder)
		if queue.ErrorCode(err) != queue.CodeTooManyWaiters {
			t.Fatalf("acquire for %s: %v, want too_many_waiters", holder, err)
		}
		if !strings.Contains(err.Error(), says) {
			t.Fatalf("refusal %q does not say %q", err, says)
		}
	}
	a1 := must("agent:a")
	must("agent:a")
	refused("agent:a", "agent:a already holds 2")
	b1 := must("agent:b")
	refused("agent:c", "holds 3 waiting requests")
	a1()
	a1() // a second release frees nothing more
	c1 := must("agent:c")
	refused("agent:b", "holds 3 waiting requests")
	b1()
	c1()
	must("agent:b")
	must("agent:b")
	refused("agent:b", "holds 3 waiting requests")

	def := longpoll.WaiterLimits{}.WithDefaults()
	if def.Total != 1000 || def.PerHolder != 100 {
		t.Fatalf("default limits %+v, want 1000 in all and 100 per holder", def)
	}
}
