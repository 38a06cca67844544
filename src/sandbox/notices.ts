import { cgroupSupport, formatBytes } from './limits.js';
import type { SandboxSettings } from './types.js';

/** What a user must know about the sandbox before a run starts (the CLI prints these once). */
export function sandboxNotices(settings: SandboxSettings): string[] {
  if (settings.kind === 'none')
    return [
      'sandbox none: the harness and task commands run with your own access: they can read and edit anything you can (your home, other projects, the database) and reach any network; use --sandbox bwrap to isolate them',
    ];
  const lines: string[] = [];
  if (settings.network === 'host')
    lines.push("network host: sandboxed commands share this machine's network (every loopback port, the internet), not only the capture proxy");
  const { maxProcs, maxMemoryBytes } = settings.limits;
  if ((maxProcs > 0 || maxMemoryBytes > 0) && cgroupSupport() === null) {
    lines.push(
      `no cgroup can be made here: the process cap (${maxProcs}) and memory cap (${formatBytes(maxMemoryBytes)}) are not enforced (rlimits cannot cap them for root); file size and CPU time caps still apply`,
    );
  }
  return lines;
}

/**
 * Why `--sandbox none` breaks GRPO groups: NeMo-RL keys a group by its samples' first-prompt token
 * ids (nemo_gym.py:1012, algorithms/utils.py:132-159 at 7ea279a), and unsandboxed each sample's
 * harness names its own workspace and home folder in that prompt (sandbox/fixed-paths.ts).
 */
export const UNSANDBOXED_GROUPS =
  "without the sandbox each sample's harness sees its own workspace and home folder, and most harnesses write those paths into their first prompt; NeMo-RL groups GRPO samples by that prompt's token ids, so each sample becomes a group of one with advantage 0 and nothing is learned (bwrap mounts every sample's workspace and home at the same fixed paths)";
