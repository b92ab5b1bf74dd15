// approvals.plan() against the real server (contract section 19): one
// decision for three steps, each step performed once, a step that differs
// from the plan refused with nothing stored, and the plan's refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ApprovedPlan,
  NotInPlanError,
  PlanCancelledError,
  PlanNotApprovedError,
  PlanRejectedError,
  PlanStillPendingError,
} from '@approvals/sdk';
import { useServer, pendingPlan, rest } from './harness.mjs';
import { tools } from './tools.mjs';

const fx = useServer(tools);

function steps(order) {
  return [
    { tool: 'issue_refund', payload: { order_id: order, line_id: 2, amount: 12.5 } },
    { tool: 'send_customer_email', payload: { customer_id: `c-${order}`, topic: 'refund', subject: 'Your refund is on its way' } },
    { tool: 'invalidate_cache', payload: { key: `orders/${order}` }, intentKey: `cache:${order}` },
  ];
}

test('a plan of three steps: one decision, each step performed once, a differing step refused', async () => {
  const title = 'Refund the duplicate charge on p-1';
  const proposing = fx.approvals.plan(steps('p-1'), { title, waitFor: '30s' });
  const pending = await pendingPlan(fx.server, title);
  assert.deepEqual(pending.steps.map((s) => s.decision), ['none', 'human', 'none']);
  await fx.staff.decidePlan(pending.id, 'approve', 'all three, once');
  const plan = await proposing;
  assert.ok(plan instanceof ApprovedPlan);
  assert.equal(plan.id, pending.id);
  assert.equal(plan.plan.state, 'approved');

  const world = { refunds: [], emails: [], cache: [] };
  const refund = plan.guard('issue_refund', async (p) => {
    world.refunds.push(p);
    return { refund_id: `re_${world.refunds.length}` };
  });
  const email = plan.guard('send_customer_email', async (p) => {
    world.emails.push(p);
    return { message_id: `m_${world.emails.length}` };
  });
  const cache = plan.guard('invalidate_cache', async (p) => {
    world.cache.push(p);
    return 'invalidated';
  }, { intentKey: 'cache:p-1' });

  // A step that differs in one field from what was approved: refused, nothing stored.
  const [r, e, c] = steps('p-1');
  await assert.rejects(email({ ...e.payload, subject: 'Sorry, and here is a coupon' }), (err) => {
    assert.ok(err instanceof NotInPlanError, err);
    assert.equal(err.status, 422);
    assert.match(err.detail, /subject/);
    return true;
  });
  assert.equal(world.emails.length, 0);
  assert.equal((await fx.approvals.find({ intentKey: 'email:c-p-1:refund' })).actions.length, 0);

  // The three steps as approved: each performed once, with no other person asked.
  assert.deepEqual(await refund(r.payload), { refund_id: 're_1' });
  assert.deepEqual(await email(e.payload), { message_id: 'm_1' });
  assert.equal(await cache(c.payload), 'invalidated');
  // Asking again replays the stored outcome of the exactly-once and at-most-once steps.
  assert.deepEqual(await refund(r.payload), { refund_id: 're_1' });
  assert.deepEqual(await email(e.payload), { message_id: 'm_1' });
  assert.equal(world.refunds.length, 1);
  assert.equal(world.emails.length, 1);
  assert.equal(world.cache.length, 1);

  const after = await plan.refresh();
  assert.equal(after.state, 'done');
  assert.deepEqual(after.steps.map((s) => s.state), ['done', 'done', 'recorded']);
  for (const s of after.steps) {
    const a = await rest(fx.server, `/api/v1/actions/${s.action_id}`);
    assert.equal(a.decided_by, `plan:${plan.id}`, JSON.stringify(a));
  }
  // One decision: nothing was ever pending for a person but the plan.
  assert.equal((await rest(fx.server, '/api/v1/actions?state=pending')).actions.length, 0);
});

test('a rejected plan throws PlanRejectedError with the note; its steps are refused', async () => {
  const title = 'Refund p-2';
  const proposing = fx.approvals.plan(steps('p-2'), { title, waitFor: '30s' });
  const pending = await pendingPlan(fx.server, title);
  await fx.staff.decidePlan(pending.id, 'reject', 'not this order');
  await assert.rejects(proposing, (err) => {
    assert.ok(err instanceof PlanRejectedError && err instanceof PlanNotApprovedError, err);
    assert.equal(err.plan.id, pending.id);
    assert.equal(err.plan.state, 'rejected');
    assert.match(err.message, /not this order/);
    return true;
  });
  // A step naming the rejected plan: 409 plan_not_approved, nothing performed.
  let performed = 0;
  const refund = new ApprovedPlan(fx.approvals, pending).guard('issue_refund', async () => ++performed);
  await assert.rejects(refund(steps('p-2')[0].payload), PlanNotApprovedError);
  assert.equal(performed, 0);
});

test('a plan withdrawn while waiting throws PlanCancelledError; one nobody decides throws PlanStillPendingError', async () => {
  const title = 'Refund p-3';
  const proposing = fx.approvals.plan(steps('p-3'), { title, waitFor: '30s' });
  const pending = await pendingPlan(fx.server, title);
  await fx.approvals.cancelPlan(pending.id);
  await assert.rejects(proposing, PlanCancelledError);

  await assert.rejects(fx.approvals.plan(steps('p-4'), { title: 'Refund p-4', waitFor: '1s' }), (err) => {
    assert.ok(err instanceof PlanStillPendingError, err);
    assert.equal(err.plan.state, 'pending');
    return true;
  });
});
