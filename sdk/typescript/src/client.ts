import type {
  Action,
  GetActionQuery,
  ListActionsQuery,
  ListActionsResponse,
  ListToolsResponse,
  Plan,
  PostApiV1PlansBody,
  State,
  SubmitBody,
} from './openapi.js';
import {
  ApprovalsConnectionError,
  ApprovalsError,
  DryRunUnsupportedError,
  PlanNotApprovedError,
  PlanStillPendingError,
  problemError,
  type VerifyCheck,
} from './errors.js';
import { defaultRetryPolicy, nextRetry, parseRetryAfter, retryableStatus, sleep, type RetryPolicy } from './retry.js';
import { goDuration, toMs, type Duration } from './duration.js';
import { guard, type GuardedFunction, type GuardOptions } from './guard.js';

export interface ApprovalsOptions {
  /** The server's base URL, such as http://localhost:8080. */
  url: string;
  /** An agent token (`approvals token create --name NAME`). */
  token: string;
  /** The fetch to use; default the platform's. */
  fetch?: typeof globalThis.fetch;
  /**
   * How the calls that are safe to repeat (reads, submissions, complete,
   * fail, cancel; never execute) are retried after a lost connection or a
   * 429/5xx answer: by default for up to 60 s (budgetMs), honouring
   * Retry-After, with backoff and jitter. false: never.
   */
  retry?: Partial<RetryPolicy> | false;
  /** One request's deadline, a long-poll's wait not counted (default 30 s). */
  requestTimeoutMs?: number;
  /**
   * The caller's current W3C trace context, sent with every request
   * (`traceparent`, `tracestate`), for callers without OpenTelemetry. Without
   * it the SDK injects the active context through `@opentelemetry/api`'s
   * propagator when that package is installed (an optional peer dependency).
   */
  traceContext?: () => TraceContext | undefined;
}

/** A W3C trace context (https://www.w3.org/TR/trace-context/). */
export interface TraceContext {
  traceparent?: string;
  tracestate?: string;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export interface SubmitOptions extends CallOptions {
  /** The business intent, such as refund:{order_id}:{line_id}; omit it when the tool's template derives it. */
  intentKey?: string;
  /** The id of an approved plan this call is a step of (`"plan"` in the submission; see plan()). */
  plan?: string;
}

export interface VerifyOptions extends CallOptions {
  /** One try: no retry of a lost answer or of a 429 too_many_checks (guard's own ask). */
  once?: boolean;
}

/** One step of a plan: a call exactly as it will be submitted. */
export interface PlanStepInput {
  tool: string;
  payload: Record<string, unknown>;
  /** Omit it when the tool's template derives it. */
  intentKey?: string;
}

export interface PlanOptions extends CallOptions {
  /** What the person deciding reads first (default: the steps' tools). */
  title?: string;
  /** Each step only once every earlier one is done or recorded. */
  ordered?: boolean;
  /** How long the plan may be used (default 24h, at most 168h). */
  expiresAfter?: Duration;
  /** How long to wait for a person's decision (default 10 minutes). */
  waitFor?: Duration;
}

export interface GetPlanOptions extends CallOptions {
  /** Long-poll: wait up to this long for the state to change (longer than 60 s is several polls). */
  wait?: Duration;
  /** Wait while the plan's state is this one (default: the state when the call starts). */
  state?: Plan['state'];
}

export interface GetOptions extends CallOptions {
  /** Long-poll: wait up to this long for the state to change (longer than the API's 60 s is several polls). */
  wait?: Duration;
  /** Wait while the state is this one (default: the state when the call starts). */
  state?: State;
}

export interface FindOptions extends CallOptions {
  intentKey?: string;
  state?: State;
  tool?: string;
  limit?: number;
  cursor?: string;
}

export interface Submission {
  action: Action;
  /** 201: a new action. For an exactly-once tool in_progress, you hold the claim. */
  created: boolean;
  /** 200 with Idempotent-Replayed: the stored action of an earlier identical call. */
  replayed: boolean;
}

/** What a dry run says a submission would do (docs/api.md, "Dry run"). */
export interface DryRunResult {
  outcome: 'approve' | 'reject' | 'human' | 'claim' | 'record' | 'replay' | 'in_progress' | 'conflict';
  /** The held action for replay, in_progress and conflict; the would-be action otherwise, when the server shows it. */
  action: Action | null;
  /** The policy rule that decided (approve, reject, human). */
  rule?: string;
  /** The grant that would approve it. */
  grant?: string;
  [key: string]: unknown;
}

/** The final states: a long-poll answers at once for these. */
export const FINAL_STATES: ReadonlySet<State> = new Set<State>([
  'done',
  'failed',
  'rejected',
  'changes_requested',
  'expired',
  'cancelled',
  'recorded',
]);

/** How a call may be repeated after a lost answer (the protocol decides). */
type Repeat =
  | 'safe' // a read, or a call the server replays (submit, complete, fail, cancel with the same body)
  | 'never'; // execute: a second one answers 409 in_progress, never permission

interface Request extends CallOptions {
  method: 'GET' | 'POST';
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  repeat: Repeat;
  /** Added to the request deadline (a long-poll's wait). */
  extraMs?: number;
  auth?: boolean;
}

interface Answer<T> {
  status: number;
  headers: Headers;
  body: T;
}

const maxPollMs = 60_000;

/** A client of the approvals agent REST API. */
export class Approvals {
  readonly url: string;
  private readonly token: string;
  private readonly fetchImpl: typeof globalThis.fetch;
  private readonly retry: RetryPolicy;
  private readonly timeoutMs: number;
  private dryRunOffered?: Promise<boolean>;
  private readonly traceContext: (() => TraceContext | undefined) | undefined;

  constructor(options: ApprovalsOptions) {
    if (!options || !options.url) throw new TypeError('new Approvals({url, token}): url is required');
    if (!options.token) throw new TypeError('new Approvals({url, token}): token is required');
    this.url = options.url.replace(/\/+$/, '');
    this.token = options.token;
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.retry = options.retry === false ? { ...defaultRetryPolicy, attempts: 1 } : { ...defaultRetryPolicy, ...options.retry };
    this.timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.traceContext = options.traceContext;
  }

  /** Submits a call of tool (POST /api/v1/actions); a repeat of the same call replays. */
  async submit(tool: string, payload: Record<string, unknown>, options: SubmitOptions = {}): Promise<Submission> {
    const body: SubmitBody = { tool, payload };
    if (options.intentKey !== undefined) body.intent_key = options.intentKey;
    if (options.plan !== undefined) body.plan = options.plan;
    const res = await this.call<Action>({ method: 'POST', path: '/api/v1/actions', body, repeat: 'safe', signal: options.signal });
    return { action: res.body, created: res.status === 201, replayed: res.headers.get('idempotent-replayed') === 'true' };
  }

  /**
   * Reads an action. With `wait` it long-polls until the state differs from
   * `state` (default: the state now), the action is final, or the wait ends,
   * and answers the action as it is then.
   */
  async get(id: string, options: GetOptions = {}): Promise<Action> {
    const path = `/api/v1/actions/${encodeURIComponent(id)}`;
    if (options.wait === undefined) {
      return (await this.call<Action>({ method: 'GET', path, repeat: 'safe', signal: options.signal })).body;
    }
    const waitMs = toMs(options.wait);
    const deadline = Date.now() + waitMs;
    let until = options.state;
    if (until === undefined && waitMs > maxPollMs) {
      // Several polls must all wait on the state at the start.
      const a = (await this.call<Action>({ method: 'GET', path, repeat: 'safe', signal: options.signal })).body;
      if (FINAL_STATES.has(a.state)) return a;
      until = a.state;
    }
    for (;;) {
      const remaining = Math.max(0, Math.min(maxPollMs, deadline - Date.now()));
      const query: GetActionQuery = { wait: goDuration(remaining) };
      if (until !== undefined) query.state = until;
      const a = (await this.call<Action>({ method: 'GET', path, query: { ...query }, repeat: 'safe', signal: options.signal, extraMs: remaining })).body;
      if (until === undefined || a.state !== until || FINAL_STATES.has(a.state) || Date.now() >= deadline) return a;
    }
  }

  /** Lists actions, newest first (GET /api/v1/actions): every attempt of an intent with {intentKey}. */
  async find(options: FindOptions = {}): Promise<ListActionsResponse> {
    const query: ListActionsQuery = {};
    if (options.intentKey !== undefined) query.intent_key = options.intentKey;
    if (options.state !== undefined) query.state = options.state;
    if (options.tool !== undefined) query.tool = options.tool;
    if (options.limit !== undefined) query.limit = options.limit;
    if (options.cursor !== undefined) query.cursor = options.cursor;
    return (await this.call<ListActionsResponse>({ method: 'GET', path: '/api/v1/actions', query: { ...query }, repeat: 'safe', signal: options.signal }))
      .body;
  }

  /** The registry (GET /api/v1/tools): each tool's class, template and the guidance agents should follow. */
  async tools(options: CallOptions = {}): Promise<ListToolsResponse> {
    return (await this.call<ListToolsResponse>({ method: 'GET', path: '/api/v1/tools', repeat: 'safe', signal: options.signal })).body;
  }

  /**
   * What a submission would do, without doing it (POST
   * /api/v1/actions?dry_run=true). A server whose OpenAPI document does not
   * offer dry_run is never sent one: an older server could take it for a
   * real submission.
   */
  async dryRun(tool: string, payload: Record<string, unknown>, options: SubmitOptions = {}): Promise<DryRunResult> {
    if (!(await this.offersDryRun(options.signal))) throw new DryRunUnsupportedError(this.url);
    const body: SubmitBody = { tool, payload };
    if (options.intentKey !== undefined) body.intent_key = options.intentKey;
    const res = await this.call<DryRunResult>({
      method: 'POST',
      path: '/api/v1/actions',
      query: { dry_run: 'true' },
      body,
      repeat: 'safe', // it writes nothing
      signal: options.signal,
    });
    if (res.status !== 200 || typeof res.body?.outcome !== 'string') {
      throw new ApprovalsError(
        { status: res.status, code: 'unexpected_answer', detail: `a dry run answered ${res.status} without an outcome` },
        `approvals: the dry run answered ${res.status} without an outcome; the server may have taken it for a submission`,
      );
    }
    return res.body;
  }

  private offersDryRun(signal?: AbortSignal): Promise<boolean> {
    this.dryRunOffered ??= this.call<{ paths?: Record<string, { post?: { parameters?: { name?: string; in?: string }[] } }> }>({
      method: 'GET',
      path: '/api/v1/openapi.json',
      repeat: 'safe',
      auth: false,
      signal,
    }).then(
      (res) => !!res.body.paths?.['/api/v1/actions']?.post?.parameters?.some((p) => p.name === 'dry_run' && p.in === 'query'),
      (err) => {
        this.dryRunOffered = undefined;
        throw err;
      },
    );
    return this.dryRunOffered;
  }

  /** Claims an approved at-most-once action for execution; never repeated by the SDK (a second execute is 409 in_progress). */
  async execute(id: string, options: CallOptions = {}): Promise<Action> {
    return (await this.call<Action>({ method: 'POST', path: `/api/v1/actions/${encodeURIComponent(id)}/execute`, repeat: 'never', signal: options.signal })).body;
  }

  /** Reports the effect's result (in_progress → done); a repeat with the same result replays. */
  async complete(id: string, result: unknown, options: CallOptions = {}): Promise<Action> {
    const body = { result: result === undefined ? null : result };
    return (await this.call<Action>({ method: 'POST', path: `/api/v1/actions/${encodeURIComponent(id)}/complete`, body, repeat: 'safe', signal: options.signal }))
      .body;
  }

  /** Reports that the effect definitely did not happen (in_progress → failed); releases the intent. */
  async fail(id: string, error: string, options: CallOptions = {}): Promise<Action> {
    return (
      await this.call<Action>({ method: 'POST', path: `/api/v1/actions/${encodeURIComponent(id)}/fail`, body: { error }, repeat: 'safe', signal: options.signal })
    ).body;
  }

  /** Asks the tool's verifier whether the effect of your in_progress action happened (docs/verifiers.md). */
  async verify(id: string, options: VerifyOptions = {}): Promise<VerifyCheck> {
    const path = `/api/v1/actions/${encodeURIComponent(id)}/verify`;
    return (await this.call<VerifyCheck>({ method: 'POST', path, repeat: options.once ? 'never' : 'safe', signal: options.signal })).body;
  }

  /**
   * Proposes a plan (POST /api/v1/plans), waits up to waitFor for a person's
   * decision and returns the approved plan, whose guarded calls carry its id.
   * A plan that is rejected, sent back for changes, cancelled or expired
   * throws PlanRejectedError, PlanChangesRequestedError, PlanCancelledError
   * or PlanExpiredError (all PlanNotApprovedError); one still pending after
   * waitFor throws PlanStillPendingError (the plan stays pending: read it
   * later with getPlan, or withdraw it with cancelPlan).
   */
  async plan(steps: PlanStepInput[], options: PlanOptions = {}): Promise<ApprovedPlan> {
    let p = await this.proposePlan(steps, options);
    const waitMs = toMs(options.waitFor ?? '10m');
    if (p.state === 'pending') p = await this.getPlan(p.id, { wait: waitMs, state: 'pending', signal: options.signal });
    if (p.state === 'approved' || p.state === 'done') return new ApprovedPlan(this, p);
    if (p.state === 'pending') throw new PlanStillPendingError(p, waitMs);
    throw PlanNotApprovedError.of(p);
  }

  /** Proposes a plan and answers it as stored (201), without waiting: plan() waits too. */
  async proposePlan(steps: PlanStepInput[], options: Omit<PlanOptions, 'waitFor'> = {}): Promise<Plan> {
    if (!Array.isArray(steps) || steps.length === 0) throw new TypeError('approvals.plan(steps): steps must be a non-empty array');
    const body: PostApiV1PlansBody = {
      title: options.title ?? `${steps.length} steps: ${steps.map((s) => s.tool).join(', ')}`,
      steps: steps.map((s) => (s.intentKey === undefined ? { tool: s.tool, payload: s.payload } : { tool: s.tool, payload: s.payload, intent_key: s.intentKey })),
    };
    if (options.ordered !== undefined) body.ordered = options.ordered;
    if (options.expiresAfter !== undefined) body.expires_after = goDuration(toMs(options.expiresAfter));
    // Not repeated: a second proposal would be a second plan for a person to decide.
    return (await this.call<Plan>({ method: 'POST', path: '/api/v1/plans', body, repeat: 'never', signal: options.signal })).body;
  }

  /** Reads a plan; with `wait` it long-polls as get() does for an action. */
  async getPlan(id: string, options: GetPlanOptions = {}): Promise<Plan> {
    const path = `/api/v1/plans/${encodeURIComponent(id)}`;
    if (options.wait === undefined) return (await this.call<Plan>({ method: 'GET', path, repeat: 'safe', signal: options.signal })).body;
    const waitMs = toMs(options.wait);
    const deadline = Date.now() + waitMs;
    let until: Plan['state'] | undefined = options.state;
    if (until === undefined) {
      const p: Plan = (await this.call<Plan>({ method: 'GET', path, repeat: 'safe', signal: options.signal })).body;
      if (PLAN_FINAL_STATES.has(p.state)) return p;
      until = p.state;
    }
    for (;;) {
      const remaining = Math.max(0, Math.min(maxPollMs, deadline - Date.now()));
      const query: Record<string, string> = { wait: goDuration(remaining), state: until };
      const p: Plan = (await this.call<Plan>({ method: 'GET', path, query, repeat: 'safe', signal: options.signal, extraMs: remaining })).body;
      if (p.state !== until || PLAN_FINAL_STATES.has(p.state) || Date.now() >= deadline) return p;
    }
  }

  /** Withdraws a plan while none of its steps has been submitted. */
  async cancelPlan(id: string, options: CallOptions = {}): Promise<Plan> {
    return (await this.call<Plan>({ method: 'POST', path: `/api/v1/plans/${encodeURIComponent(id)}/cancel`, repeat: 'safe', signal: options.signal })).body;
  }

  /** Withdraws a pending or approved action before execution. */
  async cancel(id: string, options: CallOptions = {}): Promise<Action> {
    return (await this.call<Action>({ method: 'POST', path: `/api/v1/actions/${encodeURIComponent(id)}/cancel`, repeat: 'safe', signal: options.signal })).body;
  }

  /** Wraps the function that performs tool's effect so that it runs at most once per intent: see guard.ts. */
  guard<P extends Record<string, unknown>, R>(
    tool: string,
    fn: (payload: P, action: Action) => R | Promise<R>,
    options: GuardOptions<P> = {},
  ): GuardedFunction<P, R> {
    return guard(this, tool, fn, options);
  }

  /** The caller's trace context: the traceContext option's, else OpenTelemetry's active one when it is installed. */
  private async traceHeaders(headers: Record<string, string>): Promise<void> {
    if (this.traceContext) {
      let tc: TraceContext | undefined;
      try {
        tc = this.traceContext();
      } catch {
        return; // a broken trace context never fails the call
      }
      if (tc?.traceparent) headers.traceparent = tc.traceparent;
      if (tc?.traceparent && tc.tracestate) headers.tracestate = tc.tracestate;
      return;
    }
    const otel = await loadOpenTelemetry();
    if (!otel) return;
    const carrier: Record<string, string> = {};
    try {
      otel.propagation.inject(otel.context.active(), carrier);
    } catch {
      return; // a broken propagator never fails the call
    }
    if (carrier.traceparent) headers.traceparent = carrier.traceparent;
    if (carrier.traceparent && carrier.tracestate) headers.tracestate = carrier.tracestate;
  }

  private async call<T>(req: Request): Promise<Answer<T>> {
    const url = new URL(this.url + req.path);
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept: 'application/json, application/problem+json' };
    if (req.auth !== false) headers.authorization = `Bearer ${this.token}`;
    await this.traceHeaders(headers);
    let body: string | undefined;
    if (req.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.body);
    }
    const policy: RetryPolicy = req.repeat === 'safe' ? this.retry : { ...this.retry, attempts: 1 };
    const started = Date.now();
    // The budget counts from the first try; a long-poll's wait is not part
    // of it: it counts from the first failure, or from the wait's end when
    // the answer came later, so that a read that meets the failover at the
    // end of a minute's wait is retried as long as any other.
    let deadline = started + policy.budgetMs;
    const failed = () => {
      if (attempt === 1 && req.extraMs) deadline = Math.min(Date.now(), started + req.extraMs) + policy.budgetMs;
    };
    let attempt = 1;
    for (; ; attempt++) {
      req.signal?.throwIfAborted();
      const timeout = AbortSignal.timeout(this.timeoutMs + (req.extraMs ?? 0));
      const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
      let res: Response;
      let text: string;
      try {
        res = await this.fetchImpl(url, { method: req.method, headers, body, signal });
        text = await res.text();
      } catch (err) {
        if (req.signal?.aborted) throw req.signal.reason;
        failed();
        const wait = nextRetry(policy, attempt, deadline);
        if (wait !== undefined) {
          await sleep(wait, req.signal);
          continue;
        }
        throw new ApprovalsConnectionError(
          `approvals: ${req.method} ${req.path} got no answer from ${this.url}` +
            (attempt > 1 ? ` after ${attempt} tries in ${Math.round((Date.now() - started) / 1000)}s` : '') +
            `: ${describeCause(err)}`,
          err,
        );
      }
      if (res.status < 400) {
        return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : null) as T };
      }
      if (retryableStatus(res.status)) {
        failed();
        const wait = nextRetry(policy, attempt, deadline, parseRetryAfter(res.headers.get('retry-after')));
        if (wait !== undefined) {
          await sleep(wait, req.signal);
          continue;
        }
      }
      throw problemError(parseProblem(res.status, text));
    }
  }
}

/** The plan states a long-poll answers at once for. */
const PLAN_FINAL_STATES: ReadonlySet<Plan['state']> = new Set<Plan['state']>(['rejected', 'changes_requested', 'cancelled', 'expired', 'done']);

/**
 * An approved plan (approvals.plan): its guarded calls and submissions carry
 * its id, so that each step equal to one the person approved goes through
 * once; a call that differs from every unused step is refused (NotInPlanError)
 * and nothing is stored.
 */
export class ApprovedPlan {
  readonly id: string;
  constructor(
    readonly client: Approvals,
    /** The plan as it was approved. */
    readonly plan: Plan,
  ) {
    this.id = plan.id;
  }

  get steps(): Plan['steps'] {
    return this.plan.steps;
  }

  /** client.guard, with each call a step of this plan. */
  guard<P extends Record<string, unknown>, R>(
    tool: string,
    fn: (payload: P, action: Action) => R | Promise<R>,
    options: GuardOptions<P> = {},
  ): GuardedFunction<P, R> {
    return guard(this.client, tool, fn, { ...options, plan: this.id });
  }

  /** client.submit, as a step of this plan. */
  submit(tool: string, payload: Record<string, unknown>, options: Omit<SubmitOptions, 'plan'> = {}): Promise<Submission> {
    return this.client.submit(tool, payload, { ...options, plan: this.id });
  }

  /** The plan as it is now (each step's action_id and state once submitted). */
  refresh(options: GetPlanOptions = {}): Promise<Plan> {
    return this.client.getPlan(this.id, options);
  }
}

interface OpenTelemetryApi {
  context: { active(): unknown };
  propagation: { inject(context: unknown, carrier: Record<string, string>): void };
}

let openTelemetry: Promise<OpenTelemetryApi | null> | undefined;

/** @opentelemetry/api when the application has it installed (an optional peer dependency), else null; loaded once. */
function loadOpenTelemetry(): Promise<OpenTelemetryApi | null> {
  // A specifier in a variable: the package is never required, and no bundler
  // or type check insists on it.
  const name = '@opentelemetry/api';
  openTelemetry ??= import(name).then(
    (m: { default?: OpenTelemetryApi } & Partial<OpenTelemetryApi>) => {
      const api = m.propagation && m.context ? (m as OpenTelemetryApi) : m.default;
      return api && api.propagation && api.context ? api : null;
    },
    () => null,
  );
  return openTelemetry;
}

function parseProblem(status: number, text: string): { status: number; code: string; detail?: string; title?: string } {
  try {
    const p = JSON.parse(text);
    if (p && typeof p.code === 'string') return { ...p, status };
  } catch {
    // not a problem document
  }
  return { status, code: `http_${status}`, detail: text.slice(0, 500) };
}

function describeCause(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}
