import { patient } from './patience.js';

export interface WaitOptions {
  /** Gives up early, with this error, once it says so: e.g. the child that was to make `ready` true has exited. */
  stopIf?: () => string | null;
  /** The safety net on an idle machine (scaled by POLAR_TEST_PATIENCE); default 60 s. */
  timeoutMs?: number;
  /** How often `ready` is asked; default 50 ms. */
  everyMs?: number;
}

/**
 * Resolves once `ready()` is true: a test waits for the state it needs (a row, a file, a process
 * gone), never for a number of seconds. The deadline is a safety net only, so a slow machine is
 * slow, not failing; it throws naming `what`, so a hang says what never happened.
 */
export async function waitUntil(what: string, ready: () => boolean | Promise<boolean>, opts: WaitOptions = {}): Promise<void> {
  const deadline = Date.now() + patient(opts.timeoutMs ?? 60_000);
  for (;;) {
    if (await ready()) return;
    const stop = opts.stopIf?.();
    if (stop !== null && stop !== undefined) throw new Error(`gave up waiting for ${what}: ${stop}`);
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${patient(opts.timeoutMs ?? 60_000)} ms (POLAR_TEST_PATIENCE raises it)`);
    await new Promise((r) => setTimeout(r, opts.everyMs ?? 50));
  }
}
