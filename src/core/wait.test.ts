import { getEventListeners } from 'node:events';
import { afterEach, expect, it } from 'vitest';
import { waitFor } from './wait.js';

const warnings: Error[] = [];
const onWarning = (w: Error) => warnings.push(w);

afterEach(() => {
  process.off('warning', onWarning);
  warnings.length = 0;
});

it('many waits on one signal leave no listener behind and raise no MaxListenersExceededWarning', async () => {
  process.on('warning', onWarning);
  const controller = new AbortController();
  // As the worker polls: each turn ends by its timer or by a job finishing, never by the signal.
  for (let i = 0; i < 50; i++) {
    await waitFor(i % 2 === 0 ? 1 : 10_000, controller.signal, i % 2 === 0 ? [] : [Promise.resolve()]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  }
  // Warnings are emitted on the next tick.
  await new Promise((r) => setImmediate(r));
  expect(warnings.map((w) => w.name)).not.toContain('MaxListenersExceededWarning');
});

it('ends at once when the signal aborts, and a rejected promise ends it without throwing', async () => {
  const controller = new AbortController();
  const waiting = waitFor(60_000, controller.signal);
  controller.abort();
  await waiting;
  await waitFor(60_000, new AbortController().signal, [Promise.reject(new Error('job failed'))]);
  await waitFor(60_000, controller.signal);
});
