import { setTimeout as sleep } from 'node:timers/promises';
import type { Json } from './results.js';

export interface CallbackOutcome {
  delivered: boolean;
  attempts: number;
  lastError: string | null;
}

/**
 * POSTs a TaskResult to the trainer's callback_url. Polar tries once with a 10 s timeout and leaves
 * the trainer to poll (manager.py:321-336); the bridges' listeners answer 200 to any body they read
 * (clients.md §1.2), so a 2xx is delivered and anything else is tried again, `attempts` times in all
 * with doubling waits: a listener that is slow for a moment still gets its group without a 60 s poll.
 * The poll still works whatever happens here.
 */
export async function postCallback(
  url: string,
  body: Json,
  options: { attempts?: number; timeoutMs?: number; firstWaitMs?: number; signal?: AbortSignal } = {},
): Promise<CallbackOutcome> {
  const attempts = options.attempts ?? 5;
  let lastError: string | null = null;
  let tried = 0;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    tried = attempt;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
      });
      await res.arrayBuffer().catch(() => undefined);
      if (res.ok) return { delivered: true, attempts: attempt, lastError: null };
      lastError = `HTTP ${res.status}`;
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause;
      lastError = cause?.code ?? (err as Error).message;
    }
    if (attempt < attempts) {
      if (options.signal?.aborted) break;
      await sleep((options.firstWaitMs ?? 500) * 2 ** (attempt - 1), undefined, { ref: false }).catch(() => undefined);
    }
  }
  return { delivered: false, attempts: tried, lastError };
}
