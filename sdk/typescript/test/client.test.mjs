import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  Approvals,
  ApprovalsError,
  ApprovalsConnectionError,
  ChangesRequestedError,
  InProgressError,
  IntentKeyReusedError,
  IntentKeyRequiredError,
  InvalidPayloadError,
  NotFoundError,
  NotPerformedError,
  OutcomeConflictError,
  OutcomeUnknownError,
  RejectedError,
  StillPendingError,
  UnauthorizedError,
  UnavailableError,
  DryRunUnsupportedError,
} from '@approvals/sdk';
import { useServer, pendingAction, rest, startLossyProxy } from './harness.mjs';
import { tools } from './tools.mjs';

const fx = useServer(tools);

let n = 0;
const order = () => `o-${process.pid}-${++n}`;

test('submit claims an exactly-once intent once; a repeat is 409 in_progress, then replays the result', async () => {
  const payload = { order_id: order(), line_id: 1, amount: 12.5 };
  const first = await fx.approvals.submit('issue_refund', payload);
  assert.equal(first.created, true);
  assert.equal(first.action.state, 'in_progress');
  assert.equal(first.action.intent_key, `refund:${payload.order_id}:1`);
  await assert.rejects(fx.approvals.submit('issue_refund', payload), (e) => e instanceof InProgressError && e.status === 409 && e.action.id === first.action.id);
  const done = await fx.approvals.complete(first.action.id, { refund_id: 're_1' });
  assert.equal(done.state, 'done');
  const again = await fx.approvals.submit('issue_refund', payload);
  assert.equal(again.created, false);
  assert.equal(again.replayed, true);
  assert.deepEqual(again.action.result, { refund_id: 're_1' });
  const found = await fx.approvals.find({ intentKey: `refund:${payload.order_id}:1` });
  assert.deepEqual(found.actions.map((a) => a.id), [first.action.id]);
  assert.equal(found.next_cursor, null);
  assert.equal((await fx.approvals.get(first.action.id)).state, 'done');
});

test('problems become typed errors carrying code and detail', async () => {
  const payload = { order_id: order(), line_id: 1, amount: 1 };
  const { action } = await fx.approvals.submit('issue_refund', payload);
  await assert.rejects(fx.approvals.submit('issue_refund', { ...payload, amount: 2 }), (e) => e instanceof IntentKeyReusedError && e.code === 'intent_key_reused' && e.action.id === action.id && /do not call again with other arguments/.test(e.message));
  await assert.rejects(fx.approvals.submit('issue_refund', { order_id: 'x' }), (e) => e instanceof InvalidPayloadError && e.status === 422 && /line_id/.test(e.detail));
  await assert.rejects(fx.approvals.submit('not_in_the_file', { a: 1 }), (e) => e instanceof IntentKeyRequiredError && e.status === 400);
  await assert.rejects(fx.approvals.get('no-such-action'), (e) => e instanceof NotFoundError);
  const stranger = new Approvals({ url: fx.server.url, token: 'apv_not-a-token' });
  await assert.rejects(stranger.find({ intentKey: 'x' }), (e) => e instanceof UnauthorizedError && e instanceof ApprovalsError);
  const registry = await fx.approvals.tools();
  assert.deepEqual(registry.tools.map((t) => t.name), ['invalidate_cache', 'issue_refund', 'send_customer_email']);
});

test('get with wait long-polls until a person decides', async () => {
  const { action } = await fx.approvals.submit('send_customer_email', { customer_id: order(), topic: 'welcome', subject: 'Hi' });
  assert.equal(action.state, 'pending');
  const waiting = fx.approvals.get(action.id, { wait: '30s' });
  await new Promise((r) => setTimeout(r, 300));
  await fx.staff.approve(action.id, 'fine');
  const decided = await waiting;
  assert.equal(decided.state, 'approved');
  assert.equal(decided.decided_by, 'user:ann@example.com');
});

test('a long-poll respects its AbortSignal', async () => {
  const { action } = await fx.approvals.submit('send_customer_email', { customer_id: order(), topic: 'welcome', subject: 'Hi' });
  const ctl = new AbortController();
  const started = Date.now();
  setTimeout(() => ctl.abort(new Error('agent stopped')), 200);
  await assert.rejects(fx.approvals.get(action.id, { wait: '2m', signal: ctl.signal }), /agent stopped/);
  assert.ok(Date.now() - started < 5_000, 'the abort ended the wait');
  assert.equal((await fx.approvals.get(action.id)).state, 'pending', 'nothing changed');
});

test('guard: a claim calls fn once and completes; the next call replays the stored result', async () => {
  let effects = 0;
  const refund = fx.approvals.guard('issue_refund', async (p) => ({ refund_id: `re_${++effects}`, amount: p.amount }));
  const payload = { order_id: order(), line_id: 2, amount: 9 };
  assert.deepEqual(await refund(payload), { refund_id: 're_1', amount: 9 });
  assert.deepEqual(await refund(payload), { refund_id: 're_1', amount: 9 });
  assert.equal(effects, 1);
});

// The signal aborts the submission and the wait, never the report of a
// function that ran: its effect happened (or definitely did not), and only
// the report spares an operator a ticket.
test('guard: an abort while fn runs still reports its outcome: complete after an effect, fail after NotPerformedError', async () => {
  let ctl;
  const refund = fx.approvals.guard('issue_refund', async (p) => {
    ctl.abort(new Error('agent stopped'));
    if (p.line_id === 2) throw new NotPerformedError('card declined');
    return { refund_id: 're_aborted' };
  });
  const payload = { order_id: order(), line_id: 1, amount: 5 };
  ctl = new AbortController();
  assert.deepEqual(await refund(payload, { signal: ctl.signal }), { refund_id: 're_aborted' });
  const [done] = (await fx.approvals.find({ intentKey: `refund:${payload.order_id}:1` })).actions;
  assert.deepEqual([done.state, done.result], ['done', { refund_id: 're_aborted' }]);

  const declined = { ...payload, line_id: 2 };
  ctl = new AbortController();
  await assert.rejects(refund(declined, { signal: ctl.signal }), NotPerformedError);
  const [failed] = (await fx.approvals.find({ intentKey: `refund:${payload.order_id}:2` })).actions;
  assert.deepEqual([failed.state, failed.error], ['failed', 'card declined']);
});

test('guard: NotPerformedError reports fail and releases the intent; the next call is attempt 2', async () => {
  let calls = 0;
  const refund = fx.approvals.guard('issue_refund', async () => {
    calls++;
    if (calls === 1) throw new NotPerformedError('card declined');
    return { refund_id: 're_ok' };
  });
  const payload = { order_id: order(), line_id: 1, amount: 3 };
  await assert.rejects(refund(payload), NotPerformedError);
  const [failed] = (await fx.approvals.find({ intentKey: `refund:${payload.order_id}:1` })).actions;
  assert.equal(failed.state, 'failed');
  assert.equal(failed.error, 'card declined');
  assert.deepEqual(await refund(payload), { refund_id: 're_ok' });
  const attempts = (await fx.approvals.find({ intentKey: `refund:${payload.order_id}:1` })).actions;
  assert.deepEqual(attempts.map((a) => [a.attempt, a.state]), [[2, 'done'], [1, 'failed']]);
});

test('guard: any other throw is OutcomeUnknownError, never fail; the intent stays held and fn is not called again', async () => {
  let calls = 0;
  const refund = fx.approvals.guard('issue_refund', async () => {
    calls++;
    throw new Error('ETIMEDOUT talking to the payment provider');
  });
  const payload = { order_id: order(), line_id: 1, amount: 3 };
  await assert.rejects(refund(payload), (e) => e instanceof OutcomeUnknownError && e.performed === false && /ETIMEDOUT/.test(e.message));
  const [held] = (await fx.approvals.find({ intentKey: `refund:${payload.order_id}:1` })).actions;
  assert.equal(held.state, 'in_progress', 'left for reconciliation, not failed');
  await assert.rejects(refund(payload), InProgressError);
  assert.equal(calls, 1);
});

// Hardening round 3 (issue 38): after fn ran and returned, the effect
// happened; a complete that meets another stored outcome (here a fail
// recorded meanwhile, as an operator resolving a stale claim would) is an
// OutcomeConflictError that says so, and the guard never reports fail.
test('guard: outcome_conflict after fn ran carries performed and the result, says not to call again, and reports no fail', async () => {
  let calls = 0;
  const refund = fx.approvals.guard('issue_refund', async (p, action) => {
    calls++;
    await fx.approvals.fail(action.id, 'resolved as not sent');
    return { refund_id: 're_late', amount: p.amount };
  });
  const payload = { order_id: order(), line_id: 1, amount: 7 };
  await assert.rejects(refund(payload), (e) => {
    assert.ok(e instanceof OutcomeConflictError, `got ${e}`);
    assert.equal(e.code, 'outcome_conflict');
    assert.equal(e.performed, true);
    assert.deepEqual(e.result, { refund_id: 're_late', amount: 7 });
    assert.match(e.message, /the effect happened/);
    assert.match(e.message, /do not call this tool again/);
    assert.equal(e.action.state, 'failed');
    return true;
  });
  const [a] = (await fx.approvals.find({ intentKey: `refund:${payload.order_id}:1` })).actions;
  assert.equal(a.state, 'failed', 'the stored outcome stands');
  assert.equal(a.error, 'resolved as not sent', 'the guard reported no fail of its own');
  assert.equal(a.ticket?.kind, 'conflict');
  assert.equal(a.ticket?.state, 'open');
  assert.equal(calls, 1);
});

test('an OutcomeConflictError from a report the guard did not make says nothing was performed', async () => {
  const { action } = await fx.approvals.submit('issue_refund', { order_id: order(), line_id: 1, amount: 1 });
  await fx.approvals.complete(action.id, { refund_id: 're_1' });
  await assert.rejects(fx.approvals.fail(action.id, 'no'), (e) => e instanceof OutcomeConflictError && e.performed === false && e.result === undefined);
});

test('guard: at-most-once waits for approval and runs fn once with the approved (edited) payload', async () => {
  const sent = [];
  const email = fx.approvals.guard('send_customer_email', async (p) => {
    sent.push(p);
    return { message_id: 'm-1' };
  }, { waitFor: '30s' });
  const customer = order();
  const running = email({ customer_id: customer, topic: 'refund', subject: 'Your refund', body: 'Hello' });
  const pending = await pendingAction(fx.server, `email:${customer}:refund`);
  const _csrf = await fx.staff.csrf(`/actions/${pending.id}`);
  const res = await fx.staff.request('POST', `/actions/${pending.id}/approve`, {
    _csrf,
    note: 'softer',
    payload: JSON.stringify({ customer_id: customer, topic: 'refund', subject: 'Your refund', body: 'Hello, kindly' }),
  });
  assert.equal(res.status, 303);
  assert.deepEqual(await running, { message_id: 'm-1' });
  assert.deepEqual(sent, [{ customer_id: customer, topic: 'refund', subject: 'Your refund', body: 'Hello, kindly' }]);
  const a = await fx.approvals.get(pending.id);
  assert.equal(a.state, 'done');
  assert.deepEqual(a.edited_fields, ['/body']);
});

test('guard: rejection and requested changes throw errors carrying the note; fn is never called', async () => {
  let calls = 0;
  const email = fx.approvals.guard('send_customer_email', async () => ++calls, { waitFor: '30s' });
  // Each assertion is attached before the decision: the guard may reject
  // as soon as the decision lands, before the test's own await returns,
  // and a rejection with no handler yet fails the run.
  let customer = order();
  let rejected = assert.rejects(email({ customer_id: customer, topic: 'promo', subject: 'Sale' }),
    (e) => e instanceof RejectedError && e.note === 'no promotions this week');
  let pending = await pendingAction(fx.server, `email:${customer}:promo`);
  await fx.staff.reject(pending.id, 'no promotions this week');
  await rejected;
  customer = order();
  rejected = assert.rejects(email({ customer_id: customer, topic: 'promo', subject: 'Sale' }),
    (e) => e instanceof ChangesRequestedError && e.note === 'say which products' && /submit again with the same intent key/.test(e.message));
  pending = await pendingAction(fx.server, `email:${customer}:promo`);
  await fx.staff.requestChanges(pending.id, 'say which products');
  await rejected;
  assert.equal(calls, 0);
});

test('guard: still pending after waitFor throws StillPendingError; the next call picks up the approval', async () => {
  let calls = 0;
  const email = fx.approvals.guard('send_customer_email', async () => ++calls, { waitFor: 500 });
  const payload = { customer_id: order(), topic: 'welcome', subject: 'Hi' };
  await assert.rejects(email(payload), StillPendingError);
  const pending = await pendingAction(fx.server, `email:${payload.customer_id}:welcome`);
  await fx.staff.approve(pending.id);
  assert.equal(await email(payload), 1);
  assert.equal(calls, 1);
});

test('guard: a rephrased call (same intent, other payload) is refused and fn is never called', async () => {
  let calls = 0;
  const refund = fx.approvals.guard('issue_refund', async () => ++calls);
  const o = order();
  await refund({ order_id: o, line_id: 1, amount: 5, reason: 'double charge' });
  await assert.rejects(refund({ order_id: o, line_id: 1, amount: 5, reason: 'customer was charged twice' }), IntentKeyReusedError);
  assert.equal(calls, 1);
});

test('guard: at-least-once calls fn every time (recorded, harmless to repeat)', async () => {
  let calls = 0;
  const invalidate = fx.approvals.guard('invalidate_cache', async () => ++calls);
  await invalidate({ key: 'k' });
  await invalidate({ key: 'k' });
  assert.equal(calls, 2);
});

test('a lost submission answer is retried: the replay says in_progress, which is never permission', async () => {
  const proxy = await startLossyProxy(fx.server.url);
  try {
    let drops = 0;
    proxy.setDrop((line) => line.startsWith('POST /api/v1/actions ') && drops++ === 0);
    const client = new Approvals({ url: proxy.url, token: fx.server.token, retry: { baseDelayMs: 10 } });
    let calls = 0;
    const refund = client.guard('issue_refund', async () => ++calls);
    await assert.rejects(refund({ order_id: order(), line_id: 1, amount: 1 }), InProgressError);
    assert.equal(calls, 0);
    assert.equal(proxy.dropped.length, 1);
  } finally {
    await proxy.close();
  }
});

test('a lost read is retried; a lost execute is not, and fn is never called for it', async () => {
  const proxy = await startLossyProxy(fx.server.url);
  try {
    const client = new Approvals({ url: proxy.url, token: fx.server.token, retry: { baseDelayMs: 10 } });
    const { action } = await client.submit('send_customer_email', { customer_id: order(), topic: 'welcome', subject: 'Hi' });
    let reads = 0;
    proxy.setDrop((line) => line.startsWith(`GET /api/v1/actions/${action.id}`) && reads++ === 0);
    assert.equal((await client.get(action.id)).state, 'pending');
    assert.equal(proxy.dropped.length, 1);

    await fx.staff.approve(action.id);
    proxy.setDrop((line) => line.includes('/execute'));
    let calls = 0;
    const email = client.guard('send_customer_email', async () => ++calls);
    const payload = action.payload;
    await assert.rejects(email(payload), ApprovalsConnectionError);
    assert.equal(proxy.dropped.filter((l) => l.includes('/execute')).length, 1, 'execute was sent once');
    assert.equal((await rest(fx.server, `/api/v1/actions/${action.id}`)).state, 'in_progress', 'the lost execute claimed it');
    proxy.setDrop(() => false);
    await assert.rejects(email(payload), InProgressError);
    assert.equal(calls, 0);
  } finally {
    await proxy.close();
  }
});

// The retry layer against a server that answers 503 (storage down):
// Retry-After is honoured, the retries are bounded, and a call that must
// not repeat is sent once.
test('retries honour Retry-After, are bounded, and never repeat execute', async () => {
  const hits = [];
  const stub = http.createServer((req, res) => {
    hits.push({ at: Date.now(), line: `${req.method} ${req.url}` });
    res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1' });
    res.end(JSON.stringify({ type: 'about:blank', title: 'Service Unavailable', status: 503, detail: 'storage is unreachable', code: 'unavailable' }));
  });
  await new Promise((r) => stub.listen(0, '127.0.0.1', r));
  try {
    const client = new Approvals({ url: `http://127.0.0.1:${stub.address().port}`, token: 't', retry: { attempts: 3, baseDelayMs: 10 } });
    await assert.rejects(client.get('a1'), (e) => e instanceof UnavailableError && e.status === 503);
    assert.equal(hits.length, 3, 'three tries in all');
    assert.ok(hits[1].at - hits[0].at >= 950 && hits[2].at - hits[1].at >= 950, 'each retry waited Retry-After');
    hits.length = 0;
    await assert.rejects(client.execute('a1'), UnavailableError);
    assert.equal(hits.length, 1, 'execute is never repeated');
  } finally {
    await new Promise((r) => stub.close(r));
  }
});

// A server whose OpenAPI document offers no dry_run is never sent one: an
// older server would take POST /api/v1/actions?dry_run=true for a real
// submission.
test('dryRun sends nothing to a server that does not offer it', async () => {
  const seen = [];
  const stub = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ openapi: '3.1.0', paths: { '/api/v1/actions': { post: { parameters: [{ name: 'Idempotency-Key', in: 'header' }] } } } }));
  });
  await new Promise((r) => stub.listen(0, '127.0.0.1', r));
  try {
    const client = new Approvals({ url: `http://127.0.0.1:${stub.address().port}`, token: 't' });
    await assert.rejects(client.dryRun('issue_refund', { order_id: 'o', line_id: 1 }), DryRunUnsupportedError);
    assert.deepEqual(seen, ['GET /api/v1/openapi.json']);
  } finally {
    await new Promise((r) => stub.close(r));
  }
});
