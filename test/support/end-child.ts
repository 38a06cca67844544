import type { ChildProcess } from 'node:child_process';
import { patient } from './patience.js';

/**
 * Ends a child a test started and resolves once it has exited, so nothing writes into a folder the
 * test is about to remove (a polar killed mid-rollout still ends its samples' sandboxes on SIGTERM).
 * SIGTERM first, SIGKILL if it is still there after the grace (a safety net, scaled by
 * POLAR_TEST_PATIENCE); a child that already exited resolves at once.
 */
export async function endChild(child: ChildProcess | undefined | null, graceMs = 10_000): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), patient(graceMs));
  });
  if ((await Promise.race([exited, late])) === 'late') {
    child.kill('SIGKILL');
    await exited;
  }
  clearTimeout(timer);
}
