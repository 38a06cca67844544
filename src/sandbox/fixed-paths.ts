import path from 'node:path';
import { hostView } from './view.js';

/**
 * Where a rollout's harness finds its workspace and its private home inside the sandbox: the same
 * paths for every sample. NeMo-RL groups GRPO samples by the token ids of their first prompt
 * (nemo_gym.py:1012, grpo.py:3124-3128, algorithms/utils.py:132-159 at 7ea279a), and harnesses
 * write their working directory and home into it (Claude Code's "Primary working directory" and
 * memory path, Gemini CLI's project temp folder hashed from the cwd, Pi's "Current working
 * directory"): a host path per sample would make every sample a group of one, with advantage 0.
 */
export interface InsidePaths {
  workspace: string;
  home: string;
  /**
   * polar's own files: its install (the harness CLIs) as `<polar>/node_modules`, and a Node runtime
   * it gives a harness as `<polar>/node`. Gemini CLI and Pi name their install's files in their first
   * prompt, so two checkouts (two hosts) at two paths would give two groups.
   */
  polar: string;
}

/**
 * The time zone of every command in a fixed-path sandbox: harnesses print today's date (Codex its
 * zone too), so two workers in two zones, or TZ=Pacific/Kiritimati beside TZ=UTC, would split a
 * group by a day. Unsandboxed runs (`polar run`, `polar proxy`) keep the user's own.
 */
export const SANDBOX_TZ = 'UTC';

/** The first choice of each, then one under a folder no host path is expected at. */
const WORKSPACE = ['/workspace', '/polar/workspace'];
const HOME = ['/home/agent', '/polar/home'];
const POLAR = ['/opt/polar', '/polar/install'];

/**
 * The fixed paths for a sandbox whose host mounts are `bound` (polar's node_modules, toolchains on
 * PATH, `--sandbox-ro` paths): a path that lies under, over or at one of them is taken, since the
 * bind would show polar's files inside the workspace (or bwrap could not make the mount point in a
 * read-only folder). Deterministic for one host's view, so every sample of a rollout gets the same.
 */
export function insidePaths(bound: readonly string[], install?: string): InsidePaths {
  // polar's install is shown at the fixed path, not its own: its host path takes nothing.
  const taken = bound.map((p) => path.resolve(p)).filter((p) => p !== install);
  const free = (candidates: string[], what: string): string => {
    const found = candidates.find((c) => !taken.some((t) => t === c || t.startsWith(`${c}/`) || c.startsWith(`${t}/`) || t === '/'));
    if (found) return found;
    throw new Error(`no fixed ${what} path is free in the sandbox (${candidates.join(', ')} are all under or over a host folder it mounts)`);
  };
  return { workspace: free(WORKSPACE, 'workspace'), home: free(HOME, 'home'), polar: free(POLAR, 'polar') };
}

/**
 * What every command of a fixed-path sandbox is given besides its working directory: the private
 * home and polar's install at their fixed paths, and the fixed time zone (JailSpec's fields).
 */
export function fixedPlacement(inside: InsidePaths): { homeInside: string; polarInside: string; tz: string } {
  return { homeInside: inside.home, polarInside: inside.polar, tz: SANDBOX_TZ };
}

/** The fixed paths against this process's host view and the given extra read-only mounts. */
export function sandboxInsidePaths(extraReadOnly: readonly string[] = []): InsidePaths {
  const view = hostView();
  return insidePaths([...view.dirs, ...view.symlinks.map(([, link]) => link), ...extraReadOnly], view.install);
}
