// The retry policy is its own layer: which calls may be repeated is the
// protocol's business (client.ts says per call), how often and how far apart
// is this file's. Unbounded retries only move the failure from duplicates to
// overload, so retries are bounded by a time budget (default 60 s, longer
// than a database failover: docs/operations.md, "Replication and failover"), back off exponentially
// with full jitter, and wait at least what the server asked for in
// Retry-After.

export interface RetryPolicy {
  /**
   * How long a call that is safe to repeat keeps being retried, from its
   * first try (default 60 s): no retry starts, and no wait ends, later. A
   * long-poll's wait is not counted: its budget runs from its first failure,
   * or from the end of the wait when the answer came later.
   */
  budgetMs: number;
  /** Tries in all, the first included (default: as many as fit in budgetMs). */
  attempts: number;
  /** The first backoff's ceiling (default 200 ms); each retry doubles it. */
  baseDelayMs: number;
  /** No backoff is longer (default 5 s). */
  maxDelayMs: number;
  /** A Retry-After longer than this is not waited for: the call fails (default 60 s). */
  maxRetryAfterMs: number;
}

export const defaultRetryPolicy: RetryPolicy = {
  budgetMs: 60_000,
  attempts: Number.POSITIVE_INFINITY,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  maxRetryAfterMs: 60_000,
};

/** Answers worth another try of a call that is safe to repeat. */
export function retryableStatus(status: number): boolean {
  return status === 429 || status === 500 || status === 502 || status === 503 || status === 504;
}

/** The delay before retry number `retry` (1 for the first), in ms. */
export function backoff(policy: RetryPolicy, retry: number, retryAfterMs?: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  const jittered = random() * ceiling;
  return retryAfterMs === undefined ? jittered : Math.max(retryAfterMs, jittered);
}

/**
 * The wait before retry number `retry` of a call whose budget ends at
 * `deadline` (ms since the epoch), or undefined when there is to be no
 * retry: the tries are spent, the server asks for a longer wait than the
 * policy or the budget allows, or the budget is spent. A jittered backoff
 * is cut to the budget's end; a Retry-After never is.
 */
export function nextRetry(
  policy: RetryPolicy,
  retry: number,
  deadline: number,
  retryAfterMs?: number,
  now = Date.now(),
  random: () => number = Math.random,
): number | undefined {
  if (retry >= policy.attempts) return undefined;
  const left = deadline - now;
  if (left <= 0) return undefined;
  if (retryAfterMs !== undefined && (retryAfterMs > policy.maxRetryAfterMs || retryAfterMs > left)) return undefined;
  return Math.min(left, backoff(policy, retry, retryAfterMs, random));
}

/** Retry-After in ms: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Resolves after ms, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
