/**
 * Whether a box's processes leave `exec` no room: runc's own init and the command need a few
 * of the cap, so a container a few short of it already refuses them (seen in CI: a fork bomb's
 * sleepers, with the agent's shell gone, one or two under the cap).
 */
export function nearCap(p: { current: number; cap: number }): boolean {
  return p.cap > 0 && p.current >= p.cap - EXEC_HEADROOM;
}

const EXEC_HEADROOM = 16;

/** The error as it was, with the process count the engine gave (or that it gave none), for whoever reads why. */
export function withCount(err: unknown, p: { current: number; cap: number } | null): Error {
  const message = (err as Error)?.message ?? String(err);
  return Object.assign(err instanceof Error ? err : new Error(message), {
    message: `${message} (the container runs ${p ? `${p.current} processes of a cap of ${p.cap}` : 'a number of processes the engine did not say'})`,
  });
}
