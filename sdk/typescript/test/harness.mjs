// A real approvals server for the SDK's tests: the binary built from this
// repository (APPROVALS_BIN, or `go build` here), on SQLite in a temporary
// directory, on a port the kernel chose, with an agent token and a staff
// user, and a staff browser that decides through the dashboard's forms.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { before, after } from 'node:test';
import { Approvals } from '@approvals/sdk';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

let built;
function binary() {
  if (process.env.APPROVALS_BIN) return process.env.APPROVALS_BIN;
  if (!built) {
    const dir = mkdtempSync(join(tmpdir(), 'approvals-bin-'));
    built = join(dir, 'approvals');
    execFileSync('go', ['build', '-o', built, './cmd/approvals'], { cwd: repo, stdio: 'inherit' });
  }
  return built;
}

export const PASSWORD = 'a long test passphrase';

/** A TCP port free right now on 127.0.0.1. */
export async function freePort() {
  const probe = net.createServer();
  await new Promise((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address();
  await new Promise((r) => probe.close(r));
  return port;
}

/**
 * Starts a server with the tools file `tools` (YAML); stop() ends it. With
 * {port} it listens there, and halt() and resume() stop and start its
 * process on the same address and database, as a failover would.
 */
export async function startServer(tools, { port = 0, env: extraEnv = {} } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'approvals-sdk-'));
  const toolsPath = join(dir, 'tools.yaml');
  writeFileSync(toolsPath, tools);
  const env = { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'approvals.db')}`, APPROVALS_TOOLS: toolsPath, APPROVALS_ADDR: `127.0.0.1:${port}`, ...extraEnv };
  const bin = binary();
  let proc = spawn(bin, ['serve'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  // With no users the server logs its setup link, which carries the port
  // it listens on.
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`approvals did not start within 30s:\n${log}`));
    }, 30_000);
    proc.stderr.on('data', (b) => {
      log += b;
      const m = /url="?(http:\/\/127\.0\.0\.1:\d+)\/setup/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => reject(new Error(`approvals exited (${code}):\n${log}`)));
  });
  const cli = (args, input) => execFileSync(bin, args, { env, input, encoding: 'utf8' }).trim();
  const token = cli(['token', 'create', '--name', 'sdk-test']);
  cli(['user', 'add', '--email', 'ann@example.com', '--role', 'approver'], PASSWORD + '\n');
  const halt = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    }
  };
  return {
    url,
    token,
    cli,
    newToken: (name) => cli(['token', 'create', '--name', name]),
    halt,
    /** Starts the process again (same address, same database); resolves once it answers. */
    async resume() {
      if (!port) throw new Error('resume needs a server started with {port}');
      proc = spawn(bin, ['serve'], { env, stdio: ['ignore', 'ignore', 'ignore'] });
      const deadline = Date.now() + 30_000;
      for (;;) {
        try {
          if ((await fetch(`${url}/api/v1/openapi.json`)).ok) return;
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`approvals did not start again (exit ${proc.exitCode})`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A staff member's browser: cookies, the CSRF token of each page, forms. */
export class Staff {
  constructor(url) {
    this.url = url;
    this.cookies = new Map();
  }

  async request(method, path, form) {
    const headers = { cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') };
    let body;
    if (form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(form).toString();
    }
    const res = await fetch(this.url + path, { method, headers, body, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      this.cookies.set(pair.slice(0, i), pair.slice(i + 1));
    }
    return { status: res.status, text: await res.text(), location: res.headers.get('location') };
  }

  async csrf(path) {
    const page = await this.request('GET', path);
    const m = /<meta name="csrf-token" content="([^"]+)"/.exec(page.text);
    if (!m) throw new Error(`no csrf-token meta on ${path} (${page.status})`);
    return m[1];
  }

  async login(email = 'ann@example.com', password = PASSWORD) {
    const _csrf = await this.csrf('/login');
    const res = await this.request('POST', '/login', { email, password, _csrf });
    if (res.status !== 303) throw new Error(`login answered ${res.status}: ${res.text}`);
    return this;
  }

  async decide(id, decision, note = '') {
    const _csrf = await this.csrf(`/actions/${id}`);
    const res = await this.request('POST', `/actions/${id}/${decision}`, { _csrf, note });
    if (res.status !== 303) throw new Error(`${decision} ${id} answered ${res.status}: ${res.text.slice(0, 500)}`);
  }

  /** Decides a plan on its page (/plans/{id}): approve, reject or request_changes. */
  async decidePlan(id, decision, note = '') {
    const _csrf = await this.csrf(`/plans/${id}`);
    const res = await this.request('POST', `/plans/${id}/${decision}`, { _csrf, note });
    if (res.status !== 303) throw new Error(`${decision} plan ${id} answered ${res.status}: ${res.text.slice(0, 500)}`);
  }

  approve(id, note = 'ok') {
    return this.decide(id, 'approve', note);
  }
  reject(id, note) {
    return this.decide(id, 'reject', note);
  }
  requestChanges(id, note) {
    return this.decide(id, 'request-changes', note);
  }
}

/** Reads through the REST API (independently of the SDK under test). */
export async function rest(server, path) {
  const res = await fetch(server.url + path, { headers: { authorization: `Bearer ${server.token}` } });
  return res.json();
}

/** Resolves with the pending action of an intent once there is one. */
export async function pendingAction(server, intentKey, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = await rest(server, `/api/v1/actions?state=pending&intent_key=${encodeURIComponent(intentKey)}`);
    if (list.actions.length > 0) return list.actions[0];
    if (Date.now() > deadline) throw new Error(`no pending action of ${intentKey} within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Resolves with the pending plan titled title once there is one. */
export async function pendingPlan(server, title, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = await rest(server, '/api/v1/plans?state=pending');
    const p = list.plans.find((x) => x.title === title);
    if (p) return p;
    if (Date.now() > deadline) throw new Error(`no pending plan ${JSON.stringify(title)} within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A TCP proxy between the SDK and the server that can lose answers: while
 * `drop(match)` holds for a request, it forwards the request, lets the
 * server answer (the server has acted), then closes the client's
 * connection without passing the answer on.
 */
export async function startLossyProxy(target) {
  const { port: targetPort, hostname } = new URL(target);
  const dropped = [];
  let drop = () => false;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(targetPort), hostname);
    let losing = false;
    // Connections are kept alive: every chunk that starts with a request
    // line starts a new request.
    client.on('data', (chunk) => {
      const line = /^[A-Z]+ \S+ HTTP\/1\.1/.exec(chunk.toString('latin1', 0, Math.min(chunk.length, 2048)));
      if (!losing && line && drop(line[0])) {
        losing = true;
        dropped.push(line[0]);
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (losing) {
        // The server answered: the effect of the request is done. Lose it.
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    dropped,
    /** match(requestLine) says whether to lose the answer. */
    setDrop(match) {
      drop = match;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

export { existsSync };

/**
 * The fixture of a test file: a server with the tools file `tools`, a
 * signed-in staff member and an SDK client, set up before the file's tests
 * and stopped after them. Its fields are set once `before` has run.
 */
export function useServer(tools, clientOptions = {}, serverOptions = {}) {
  const ctx = {};
  before(async () => {
    ctx.server = await startServer(typeof tools === 'function' ? await tools() : tools, serverOptions);
    ctx.staff = await new Staff(ctx.server.url).login();
    ctx.approvals = new Approvals({ url: ctx.server.url, token: ctx.server.token, ...clientOptions });
  });
  after(() => ctx.server?.stop());
  return ctx;
}
