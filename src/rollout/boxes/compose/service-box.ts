import type { SandboxLimits } from '../../../sandbox/index.js';
import { runHealthcheck } from '../healthcheck.js';
import type { Box, BoxProvider, BoxSpec, ExecResult, Healthcheck } from '../types.js';
import type { ComposeService } from './plan.js';

export interface SidecarSettings {
  /** The sample's id: each box's id is `<id>-<service>`. */
  id: string;
  limits: SandboxLimits;
  cpus: number | null;
  /** A one-shot service's own budget (its command until it exits). */
  oneShotTimeoutSec: number;
}

/**
 * The box of one sidecar on `network`, reached by its service name and aliases (compose's DNS on a
 * project network). A one-shot service (another waits for it with service_completed_successfully)
 * starts idle, with no ENTRYPOINT, and its command runs in it (runOneShot): a Box says when a
 * command inside ends, not when the box's own process does.
 */
export async function sidecarSpec(
  provider: BoxProvider,
  s: ComposeService,
  image: string,
  network: string,
  oneShot: boolean,
  set: SidecarSettings,
): Promise<BoxSpec> {
  const workdir = s.workingDir ?? (await provider.imageWorkdir(image));
  const spec: BoxSpec = {
    id: `${set.id}-${s.name}`,
    image,
    workdir,
    network: { kind: 'attach', network, aliases: [s.name, ...s.aliases] },
    mounts: [],
    limits: set.limits,
    cpus: set.cpus,
    env: s.env,
  };
  if (s.hostname !== undefined) spec.hostname = s.hostname;
  if (oneShot) return { ...spec, entrypoint: [] };
  // No `command`: the image's own CMD, as compose runs it ([] adds no command after the image;
  // absent would be polar's keep-alive, which is for boxes polar execs in).
  spec.command = s.command ?? [];
  if (s.entrypoint !== undefined) spec.entrypoint = s.entrypoint;
  return spec;
}

/** A one-shot service's `entrypoint` + `command` in its box, in its working folder: null when it exited 0, else why not. */
export async function runOneShot(box: Box, s: ComposeService, set: SidecarSettings): Promise<string | null> {
  const words = [...(s.entrypoint ?? []), ...(s.command ?? [])];
  const r = await box.sh('cd -- "$1" && shift && exec "$@"', [box.workdir, ...words], set.oneShotTimeoutSec * 1000);
  if (r.code === 0) return null;
  return r.timedOut ? `its command did not end within ${set.oneShotTimeoutSec} s` : `its command exited ${r.code ?? '(not run)'}${tail(r)}`;
}

/**
 * The service's healthcheck in its box with sh, as root (Docker runs it in the container, `sh -c`
 * for CMD-SHELL), through Harbor's loop (healthcheck.ts): null once it passes. `aborted` ends the
 * loop at its next attempt when another service already failed.
 */
export function waitHealthy(box: Box, hc: Healthcheck, aborted: () => boolean): Promise<string | null> {
  return runHealthcheck(hc, async (timeoutMs) => {
    if (aborted()) throw new Error('another compose service failed');
    const r = await box.sh(hc.command, [], timeoutMs);
    if (r.code === 0) return { ok: true };
    return { ok: false, why: r.timedOut ? `timed out after ${hc.timeoutSec} s` : `exit ${r.code ?? '(not run)'}${tail(r)}` };
  });
}

function tail(r: ExecResult): string {
  const out = (r.stderr.trim() || r.stdout.trim()).slice(-300);
  return out ? `: ${out}` : '';
}
