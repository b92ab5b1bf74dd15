// docs/operations.md, "Replication and failover": while the server or its database is away (a
// failover), the SDK retries the calls that are safe to repeat for up to
// 60 s, honouring Retry-After, with backoff and jitter; it never repeats an
// execute. Against the real server, stopped and started again on the same
// address and SQLite file, and against a proxy that answers 503 first.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Approvals, ApprovalsConnectionError, UnavailableError, defaultRetryPolicy } from '@approvals/sdk';
import { startServer, freePort, Staff, rest } from './harness.mjs';
import { tools } from './tools.mjs';
import { nextRetry } from '../dist/retry.js';

let server;
let staff;
before(async () => {
  server = await startServer(tools, { port: await freePort() });
  staff = await new Staff(server.url).login();
});
after(() => server?.stop());

let n = 0;
const order = () => `f-${process.pid}-${++n}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('the default retry budget is 60 s, with no fixed count of tries', () => {
  assert.equal(defaultRetryPolicy.budgetMs, 60_000);
  assert.equal(defaultRetryPolicy.attempts, Number.POSITIVE_INFINITY);
});

test('nextRetry: jittered, honours Retry-After, cut to the budget, none past it', () => {
  const p = { ...defaultRetryPolicy, baseDelayMs: 200, maxDelayMs: 5_000 };
  const now = 1_000_000;
  assert.equal(nextRetry(p, 1, now + 60_000, undefined, now, () => 0.5), 100, 'half of the first ceiling');
  assert.equal(nextRetry(p, 10, now + 60_000, undefined, now, () => 1), 5_000, 'the ceiling stops at maxDelayMs');
  assert.equal(nextRetry(p, 1, now + 60_000, 2_000, now, () => 0.5), 2_000, 'at least Retry-After');
  assert.equal(nextRetry(p, 10, now + 1_000, undefined, now, () => 1), 1_000, 'a backoff ends with the budget');
  assert.equal(nextRetry(p, 1, now + 1_000, 2_000, now, () => 0), undefined, 'a Retry-After past the budget: no retry');
  assert.equal(nextRetry(p, 1, now, undefined, now, () => 0), undefined, 'the budget is spent');
  assert.equal(nextRetry({ ...p, attempts: 3 }, 3, now + 60_000, undefined, now, () => 0), undefined, 'the tries are spent');
});

test('a guarded exactly-once call survives the server stopping before the submission and after the effect: one effect, done', async () => {
  const client = new Approvals({ url: server.url, token: server.token });
  let effects = 0;
  const refund = client.guard('issue_refund', async (p) => {
    effects++;
    // The effect happened; the server goes away before complete is sent.
    await server.halt();
    setTimeout(() => server.resume(), 1_500);
    return { refund_id: `re_${effects}`, amount: p.amount };
  });

  // Away before the submission too: the submission waits for it.
  await server.halt();
  const resumed = sleep(1_500).then(() => server.resume());
  const payload = { order_id: order(), line_id: 1, amount: 4 };
  const started = Date.now();
  assert.deepEqual(await refund(payload), { refund_id: 're_1', amount: 4 });
  await resumed;
  assert.ok(Date.now() - started >= 3_000, 'both outages were waited out');
  assert.equal(effects, 1);
  const list = await rest(server, `/api/v1/actions?intent_key=${encodeURIComponent(`refund:${payload.order_id}:1`)}`);
  assert.deepEqual(list.actions.map((a) => [a.attempt, a.state]), [[1, 'done']]);
  assert.deepEqual(list.actions[0].result, { refund_id: 're_1', amount: 4 });
});

test('execute is never repeated while the server is away: one try, then the error', async () => {
  const client = new Approvals({ url: server.url, token: server.token });
  const { action } = await client.submit('send_customer_email', { customer_id: order(), topic: 'welcome', subject: 'Hi' });
  await staff.approve(action.id);
  await server.halt();
  try {
    const started = Date.now();
    await assert.rejects(client.execute(action.id), ApprovalsConnectionError);
    assert.ok(Date.now() - started < 1_000, 'no retry');
  } finally {
    await server.resume();
  }
  assert.equal((await client.get(action.id)).state, 'approved', 'nothing was claimed');
});

/** A proxy to the server that answers 503 unavailable with Retry-After while `down` is true. */
async function startGate(target) {
  const gate = { down: true, hits: [] };
  const stub = http.createServer((req, res) => {
    gate.hits.push({ at: Date.now(), line: `${req.method} ${req.url}`, down: gate.down });
    if (gate.down) {
      res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': String(gate.retryAfter ?? 1) });
      res.end(JSON.stringify({ type: 'about:blank', title: 'Service Unavailable', status: 503, detail: 'storage is unreachable', code: 'unavailable' }));
      req.resume();
      return;
    }
    const up = new URL(target);
    const fwd = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    req.pipe(fwd);
  });
  await new Promise((r) => stub.listen(0, '127.0.0.1', r));
  gate.url = `http://127.0.0.1:${stub.address().port}`;
  gate.close = () => new Promise((r) => stub.close(r));
  return gate;
}

test('503 with Retry-After during a failover: the submission waits as asked and goes through once', async () => {
  const gate = await startGate(server.url);
  try {
    const client = new Approvals({ url: gate.url, token: server.token });
    setTimeout(() => (gate.down = false), 2_500);
    const payload = { order_id: order(), line_id: 1, amount: 2 };
    const sub = await client.submit('issue_refund', payload);
    assert.equal(sub.created, true);
    assert.equal(sub.action.state, 'in_progress');
    const posts = gate.hits.filter((h) => h.line.startsWith('POST'));
    assert.ok(posts.length >= 3, `tried ${posts.length} times`);
    for (let i = 1; i < posts.length; i++) assert.ok(posts[i].at - posts[i - 1].at >= 950, 'each retry waited Retry-After');
    assert.equal(posts.at(-1).down, false);
  } finally {
    await gate.close();
  }
});

test('the retries stop at the budget; a Retry-After past it is not waited for', async () => {
  const gate = await startGate(server.url);
  try {
    const client = new Approvals({ url: gate.url, token: server.token, retry: { budgetMs: 2_500 } });
    let started = Date.now();
    await assert.rejects(client.get('a1'), (e) => e instanceof UnavailableError && e.status === 503);
    const took = Date.now() - started;
    assert.ok(took >= 1_900 && took < 3_500, `gave up after ${took} ms`);
    assert.equal(gate.hits.length, 3, 'tries at 0, 1 and 2 s');
    gate.hits.length = 0;
    gate.retryAfter = 120;
    started = Date.now();
    await assert.rejects(client.get('a1'), UnavailableError);
    assert.ok(Date.now() - started < 500);
    assert.equal(gate.hits.length, 1);
  } finally {
    await gate.close();
  }
});

/**
 * A proxy that passes every request to the server and, while `down` is
 * true, answers 503 unavailable with Retry-After 1 in place of the server's
 * answer: a long-poll that waited its full time and met the database gone
 * at its end, as the server's last read of the action would.
 */
async function startLateGate(target) {
  const gate = { down: false, hits: [] };
  const unavailable = (res) => {
    res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1' });
    res.end(JSON.stringify({ type: 'about:blank', title: 'Service Unavailable', status: 503, detail: 'storage is unreachable', code: 'unavailable' }));
  };
  const stub = http.createServer((req, res) => {
    const up = new URL(target);
    const fwd = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      const chunks = [];
      answer.on('data', (c) => chunks.push(c));
      answer.on('end', () => {
        gate.hits.push({ at: Date.now(), line: `${req.method} ${req.url}`, down: gate.down });
        if (gate.down) return unavailable(res);
        res.writeHead(answer.statusCode, answer.headers);
        res.end(Buffer.concat(chunks));
      });
    });
    req.pipe(fwd);
  });
  await new Promise((r) => stub.listen(0, '127.0.0.1', r));
  gate.url = `http://127.0.0.1:${stub.address().port}`;
  gate.close = () =>
    new Promise((r) => {
      stub.closeAllConnections();
      stub.close(r);
    });
  return gate;
}

test("a long-poll that meets a 503 at the end of its wait is retried for the whole budget: the wait is not part of it", async () => {
  const gate = await startLateGate(server.url);
  try {
    const client = new Approvals({ url: gate.url, token: server.token, retry: { budgetMs: 3_000 } });
    const { action } = await client.submit('send_customer_email', { customer_id: order(), topic: 'welcome', subject: 'Hi' });
    gate.down = true;
    const started = Date.now();
    // The poll waits 4 s (longer than the budget), meets the 503, and the
    // database is back 1.5 s later.
    setTimeout(() => (gate.down = false), 5_500);
    const a = await client.get(action.id, { wait: 4_000, state: 'pending' });
    assert.equal(a.state, 'pending');
    const gets = gate.hits.filter((h) => h.line.startsWith('GET'));
    assert.ok(gets.length >= 2 && gets[0].down && !gets.at(-1).down, `tries: ${JSON.stringify(gets)}`);
    assert.ok(Date.now() - started >= 5_500, 'the retries waited the outage out');
  } finally {
    await gate.close();
  }
});
