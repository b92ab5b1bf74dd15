// guard after an unknown outcome (contract section 18): it asks the tool's
// verifier once. The verifier is a real webhook: a local HTTP server that
// answers as a payment provider's refund lookup would.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { NoVerifierError, OutcomeUnknownError, TooManyChecksError } from '@approvals/sdk';
import { useServer } from './harness.mjs';

/** The payment provider: its refunds, and a lookup of an order's refunds as the verifier asks it. */
const provider = { refunds: [], lookups: 0, server: undefined };
provider.server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    provider.lookups++;
    const { action } = JSON.parse(body);
    const signed = typeof req.headers['webhook-signature'] === 'string' && req.headers['webhook-signature'].startsWith('v1,');
    if (req.url !== '/refunds/lookup' || !signed || action?.payload?.order_id === undefined) {
      res.writeHead(400).end();
      return;
    }
    const refunds = provider.refunds.filter((r) => r.order_id === action.payload.order_id);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ refunds }));
  });
});
after(() => new Promise((r) => provider.server.close(r)));

function verifiedTool(name, resolve) {
  return `  ${name}:
    class: exactly-once
    intent: "${name}:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: http://127.0.0.1:${provider.server.address().port}/refunds/lookup
      timeout: 5s
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      not_done: '!response.refunds.exists(r, r.line_id == payload.line_id)'
      result: 'response.refunds.filter(r, r.line_id == payload.line_id)[0]'
      settle: 1h
      resolve: ${resolve}
`;
}

const fx = useServer(
  async () => {
    await new Promise((r) => provider.server.listen(0, '127.0.0.1', r));
    return `tools:
${verifiedTool('issue_refund', 'auto')}${verifiedTool('suggest_refund', 'suggest')}  plain_refund:
    class: exactly-once
    intent: "plain_refund:{order_id}:{line_id}"
`;
  },
  {},
  { env: { APPROVALS_WEBHOOK_SECRET: 'whsec_' + Buffer.from('a test secret of 32 bytes length').toString('base64') } },
);

/** A refund whose provider acts, then the answer is lost (a timeout after the effect). */
function lostAnswer(tool, calls) {
  return fx.approvals.guard(tool, async (p) => {
    calls.push(p);
    provider.refunds.push({ id: `re_${provider.refunds.length + 1}`, order_id: p.order_id, line_id: p.line_id, amount: p.amount });
    throw new Error('socket hang up');
  });
}

test('the answer is lost after the provider refunded: guard asks the verifier once and returns its record', async () => {
  const calls = [];
  const refund = lostAnswer('issue_refund', calls);
  const payload = { order_id: 'v-1', line_id: 'l-2', amount: 12.5 };
  const lookups = provider.lookups;
  const result = await refund(payload);
  assert.deepEqual(result, { id: 're_1', order_id: 'v-1', line_id: 'l-2', amount: 12.5 });
  assert.equal(provider.lookups, lookups + 1, 'one check');
  assert.equal(calls.length, 1);

  const [a] = (await fx.approvals.find({ intentKey: 'issue_refund:v-1:l-2' })).actions;
  assert.equal(a.state, 'done');
  assert.deepEqual(a.result, result);
  // Settled by the verifier (its check in the action's timeline), no person asked.
  const page = await fx.staff.request('GET', `/actions/${a.id}`);
  assert.equal(page.status, 200);
  assert.match(page.text, /verifier:issue_refund/);

  // The agent's retry gets the stored record replayed; the refund is never sent again.
  assert.deepEqual(await refund(payload), result);
  assert.equal(calls.length, 1);
  assert.equal(provider.refunds.filter((r) => r.order_id === 'v-1').length, 1);
});

test('the effect never reached the provider: the verdict is unknown, guard throws the original error with the check', async () => {
  let calls = 0;
  const refund = fx.approvals.guard('issue_refund', async () => {
    calls++;
    throw new Error('connect ETIMEDOUT');
  });
  await assert.rejects(refund({ order_id: 'v-2', line_id: 'l-1', amount: 3 }), (err) => {
    assert.ok(err instanceof OutcomeUnknownError, err);
    assert.match(err.message, /ETIMEDOUT/);
    assert.equal(err.check.verdict, 'unknown', JSON.stringify(err.check)); // not_done only counts after settle
    assert.equal(err.check.action.state, 'in_progress');
    return true;
  });
  assert.equal(calls, 1);
  const [a] = (await fx.approvals.find({ intentKey: 'issue_refund:v-2:l-1' })).actions;
  assert.equal(a.state, 'in_progress');
});

test('a verifier that only suggests: done is shown, not stored, so guard throws with the done check', async () => {
  const calls = [];
  await assert.rejects(lostAnswer('suggest_refund', calls)({ order_id: 'v-3', line_id: 'l-1', amount: 5 }), (err) => {
    assert.ok(err instanceof OutcomeUnknownError, err);
    assert.equal(err.check.verdict, 'done');
    assert.equal(err.check.action.state, 'in_progress');
    return true;
  });
  assert.equal(calls.length, 1);
});

test('a tool without a verifier, and a verifier asked moments ago: guard throws the original error at once', async () => {
  let calls = 0;
  const plain = fx.approvals.guard('plain_refund', async () => {
    calls++;
    throw new Error('socket hang up');
  });
  await assert.rejects(plain({ order_id: 'v-4', line_id: 'l-1', amount: 1 }), (err) => {
    assert.ok(err instanceof OutcomeUnknownError, err);
    assert.ok(err.check instanceof NoVerifierError, String(err.check));
    return true;
  });
  assert.equal(calls, 1);

  // The function itself asked just before failing: guard's own ask is
  // refused (429 too_many_checks) and not retried after Retry-After.
  const refund = fx.approvals.guard('issue_refund', async (_p, action) => {
    await fx.approvals.verify(action.id);
    throw new Error('socket hang up');
  });
  const started = Date.now();
  await assert.rejects(refund({ order_id: 'v-5', line_id: 'l-1', amount: 1 }), (err) => {
    assert.ok(err instanceof OutcomeUnknownError, err);
    assert.ok(err.check instanceof TooManyChecksError, String(err.check));
    return true;
  });
  assert.ok(Date.now() - started < 5000, `took ${Date.now() - started}ms`);
});

test('OutcomeUnknownError.verify asks the verifier for the caller', async () => {
  const refund = fx.approvals.guard('issue_refund', async () => {
    throw new Error('socket hang up');
  }, { verify: false });
  const lookups = provider.lookups;
  const err = await refund({ order_id: 'v-6', line_id: 'l-1', amount: 1 }).catch((e) => e);
  assert.ok(err instanceof OutcomeUnknownError);
  assert.equal(err.check, undefined);
  assert.equal(provider.lookups, lookups, 'verify: false asks nothing');
  const check = await err.verify();
  assert.equal(check.verdict, 'unknown');
  assert.equal(provider.lookups, lookups + 1);
});
