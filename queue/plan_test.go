package queue_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
)

// planSpy counts the plan reads of a Service and the submissions that
// ask the store to use a plan step.
type planSpy struct {
	queue.Store
	planReads, stepClaims atomic.Int32
}

func (s *planSpy) PlanGetByID(ctx context.Context, id string) (*queue.Plan, error) {
	s.planReads.Add(1)
	return s.Store.PlanGetByID(ctx, id)
}

func (s *planSpy) ActionSubmit(ctx context.Context, p queue.ActionSubmitParams) (queue.ActionSubmitResult, error) {
	if p.PlanStep != nil {
		s.stepClaims.Add(1)
	}
	return s.Store.ActionSubmit(ctx, p)
}

// TestSubmitWithoutPlanReadsNoPlan: plans cost a submission that names
// none nothing: no plan is read and the store is asked for no step.
func TestSubmitWithoutPlanReadsNoPlan(t *testing.T) {
	t.Parallel()
	e := apptest.DomainEnv(t, testclock.Frozen())
	spy := &planSpy{}
	svc := e.AddWrappedProcess(func(st queue.Store) queue.Store { spy.Store = st; return spy }).Service
	ctx := context.Background()
	for _, tool := range []string{"send_customer_email", "issue_refund"} {
		payload := map[string]any{"customer_id": "c-1", "topic": "t", "order_id": "o-1", "line_id": 1, "amount": 3}
		apptest.Submit(t, svc, tool, payload)
	}
	if spy.planReads.Load() != 0 || spy.stepClaims.Load() != 0 {
		t.Fatalf("submissions without a plan read %d plans and asked for %d steps", spy.planReads.Load(), spy.stepClaims.Load())
	}
	// One naming a plan reads it once and asks for its step.
	pl, err := svc.Plans().Propose(ctx, queue.PlanRequest{Title: "t", Agent: "bot", Steps: []queue.PlanStepRequest{
		{Tool: "issue_refund", Payload: []byte(`{"order_id":"o-2","line_id":1,"amount":3}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Plan.State != queue.PlanApproved {
		t.Fatalf("a plan of one exactly-once step no rule decides: %s", pl.Plan.State)
	}
	res, err := svc.Submit(ctx, queue.SubmitRequest{Tool: "issue_refund", Payload: []byte(`{"order_id":"o-2","line_id":1,"amount":3}`), Agent: "bot", Plan: pl.Plan.ID})
	if err != nil || !res.Created || res.Action.State != queue.StateInProgress {
		t.Fatalf("step: %+v %v", res, err)
	}
	if spy.planReads.Load() != 1 || spy.stepClaims.Load() != 1 {
		t.Fatalf("a step read %d plans and asked for %d steps, want 1 and 1", spy.planReads.Load(), spy.stepClaims.Load())
	}
}
