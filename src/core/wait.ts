/**
 * Waits until `ms` pass, `signal` aborts or one of `others` settles, whichever is first, and then
 * removes what it added: its timer and its abort listener. A poll loop that adds a `once` listener
 * per turn and never removes it leaves one on the signal for every turn that did not abort (the
 * worker's queue poll reached Node's limit of 10 in five seconds: MaxListenersExceededWarning).
 */
export async function waitFor(ms: number, signal: AbortSignal, others: Iterable<Promise<unknown>> = []): Promise<void> {
  if (signal.aborted) return;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    onAbort = () => resolve();
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    // A rejection among `others` ends the wait too; its owner handles the error.
    await Promise.race([stop, ...[...others].map((p) => p.then(noop, noop))]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort!);
  }
}

function noop(): void {}
