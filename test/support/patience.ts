/**
 * How long the suite waits before it calls something stuck: one knob for every safety net.
 *
 * Timeouts in this suite never gate a result (tests wait for events: an exit, a file, a row); they
 * only end a test that would otherwise hang. A 2-core machine doing other work runs a child process
 * many times slower than CI does (a load of 10–28 made 30 s tests fail while nothing was wrong), so
 * every net is a base sized for an idle machine times PATIENCE: POLAR_TEST_PATIENCE=10 npm test on a
 * very busy one. A larger value costs nothing while tests pass; it only delays the report of a hang.
 */
export const PATIENCE: number = (() => {
  const raw = process.env.POLAR_TEST_PATIENCE;
  if (raw === undefined || raw === '') return 4;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`POLAR_TEST_PATIENCE must be a positive number (got "${raw}"); leave it unset for 4`);
  return n;
})();

/** A safety net of `ms` on an idle machine, in milliseconds: for vitest timeouts and a child's `timeout`. */
export function patient(ms: number): number {
  return Math.round(ms * PATIENCE);
}

/** The same for a budget polar itself counts in seconds (a task's `timeout`, an evaluator's). */
export function patientSeconds(s: number): number {
  return Math.ceil(s * PATIENCE);
}
