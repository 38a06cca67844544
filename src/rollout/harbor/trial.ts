import fs from 'node:fs/promises';
import path from 'node:path';
import type { Bind } from '../../sandbox/index.js';
import { PolarError } from '../../core/errors.js';
import { StageError } from '../stage-error.js';
import type { RolloutTask } from '../task-file.js';
import { destEscape, linkEscape, sourceEscape } from './copy-guard.js';
import { dockerIgnored } from './dockerignore.js';
import type { HarborTrial } from './types.js';
import { hostRefusal, hostUserNotice } from './features.js';

export { resolveEnv } from './env.js';

/**
 * Harbor's trial (trial/single_step.py:32-49: the agent, then the verifier) on the host environment
 * (no container engine; environments/host.ts runs it): the workspace is the image's WORKDIR, built
 * from what the Dockerfile copies; inside the sandbox it sits at that path, with /logs beside it
 * (trial/paths.py:35-43). The agent never sees tests/ or solution/: /tests is mounted for the
 * verifier only, after the agent ended, and /solution for the oracle only.
 */

/** The sample's /logs on the host, beside its workspace (removed with it). */
export function logsDir(workspace: string): string {
  return `${workspace}-logs`;
}

/**
 * The starting state: the Dockerfile's copies from environment/, applied to an empty workspace. The
 * loader refused sources and links that lead out of environment/; the same checks run again here
 * (the folder is read now, not then), and nothing is written through a link into the host.
 */
export async function buildStartingState(trial: HarborTrial, dest: string): Promise<void> {
  await fs.mkdir(dest, { recursive: true });
  const context = path.join(trial.dir, 'environment');
  const ignore = trial.ignore ?? [];
  const kept = (src: string, isDir: boolean) => {
    const rel = path.relative(context, src).split(path.sep).join('/');
    return rel === '' || !dockerIgnored(rel, ignore, isDir);
  };
  const refuse = (what: string) => {
    throw new StageError('init', `task ${trial.name}: ${what}; the host environment copies only what lies inside environment/ into the workspace`);
  };
  // Every entry a copy carries: left out by .dockerignore, or refused when it is a link to outside.
  const filter = async (src: string): Promise<boolean> => {
    const st = await fs.lstat(src);
    if (!kept(src, st.isDirectory())) return false;
    if (st.isSymbolicLink()) {
      const why = linkEscape(context, src);
      if (why) refuse(`environment/${path.relative(context, src)} ${why}`);
    }
    return true;
  };
  for (const c of trial.copies) {
    const to = path.join(dest, c.to);
    if (!kept(c.from, c.dir)) continue;
    const source = sourceEscape(context, c.from);
    if (source) refuse(`environment/${path.relative(context, c.from)} ${source}`);
    const target = destEscape(dest, to);
    if (target) refuse(`the copy to ${c.to || '.'} would write outside the workspace: ${target}`);
    if (c.dir) await fs.cp(c.from, to, { recursive: true, verbatimSymlinks: true, filter });
    else {
      await fs.mkdir(path.dirname(to), { recursive: true });
      await fs.cp(c.from, to, { verbatimSymlinks: true });
    }
  }
  await fs.mkdir(path.join(logsDir(dest), 'agent'), { recursive: true });
  await fs.mkdir(path.join(logsDir(dest), 'verifier'), { recursive: true });
}

/** What the harness's sandbox gets for a Harbor task: the workspace at WORKDIR and /logs. */
export function agentMounts(trial: HarborTrial, workspace: string): { cwdInside: string; binds: Bind[] } {
  return { cwdInside: trial.workdir, binds: [{ source: logsDir(workspace), dest: '/logs', readOnly: false }] };
}

/**
 * Before a process that runs Harbor tasks starts: they need the sandbox (their paths are the
 * container's), and what the host does not reproduce is said once per task (nothing with an engine:
 * the task's own image runs).
 */
export function harborPreflight(tasks: readonly RolloutTask[], sandbox: 'bwrap' | 'none', environment = 'host'): string[] {
  if (sandbox === 'none' && tasks.some((t) => t.harbor)) {
    throw new PolarError('POLAR_USAGE', "Harbor tasks run in the sandbox, which gives them their container's paths (/app, /tests, /logs); drop --sandbox none");
  }
  return [...loadNotices(tasks), ...(environment === 'host' ? hostNotices(tasks) : [])];
}

/**
 * Said once per task before a rollout starts, in every environment: the keys Harbor's models ignore
 * (ignored here too), and a network allowlist run as no network (toml-fields.ts network).
 */
export function loadNotices(tasks: readonly RolloutTask[]): string[] {
  const out: string[] = [];
  for (const t of tasks) {
    const h = t.harbor;
    if (!h) continue;
    for (const line of h.ignored ?? []) out.push(`notice: task ${t.id}: ${line}`);
    for (const list of h.allowlists ?? [])
      out.push(
        `notice: task ${t.id}: [${list.table}] network_mode = "allowlist" (${list.hosts.join(', ') || 'no host'}) runs with no network: polar cannot reach hosts by name from its sandbox yet`,
      );
  }
  return out;
}

/** Said once per task before a rollout starts: what the host environment does not reproduce. */
export function hostNotices(tasks: readonly RolloutTask[]): string[] {
  const out: string[] = [];
  for (const t of tasks) {
    const h = t.harbor;
    if (!h) continue;
    const runs = h.skipped;
    const refused = hostRefusal(h);
    if (refused) out.push(`notice: ${refused}; its samples end in error here`);
    const users = hostUserNotice(h);
    if (users) out.push(`notice: task ${t.id}: ${users}`);
    if (h.verifierMode === 'separate')
      out.push(
        `notice: task ${t.id}: its separate verifier runs in polar's sandbox with this machine's tools, not ${h.separateVerifier?.image ?? "tests/Dockerfile's image"}; only its artifacts under ${h.workdir} and /logs reach it`,
      );
    if (!h.baseImage && runs.length === 0) continue;
    out.push(
      `notice: task ${t.id}: the host environment does not reproduce ${h.baseImage ? `the base image ${h.baseImage}` : 'the image'}${runs.length > 0 ? ` or these Dockerfile steps:\n  ${runs.map((r) => r.slice(0, 200)).join('\n  ')}` : ''}\n  (the workspace at ${h.workdir} holds the files it copies from environment/; the tools come from this machine)`,
    );
  }
  return out;
}

/**
 * The top reward a task can give, for the oracle check: 1 (Harbor's pass), unless task.toml
 * [metadata] says otherwise with `max_reward` (a polar convention for tasks scored on another scale).
 */
export function topReward(metadata: Record<string, unknown>): number {
  const max = metadata.max_reward;
  return typeof max === 'number' && Number.isFinite(max) && max > 0 ? max : 1;
}
