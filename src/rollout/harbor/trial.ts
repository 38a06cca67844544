import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { runShell, type ShellResult } from '../../core/process/shell.js';
import type { HarnessCommand } from '../../harness/types.js';
import { openJail, type Bind, type Jail, type NetworkMode, type SandboxSettings } from '../../sandbox/index.js';
import { scrubSecrets } from '../../store/redact.js';
import { PolarError } from '../../core/errors.js';
import { StageError } from '../stage-error.js';
import type { RolloutTask } from '../task-file.js';
import { destEscape, linkEscape, sourceEscape } from './copy-guard.js';
import { dockerIgnored } from './dockerfile.js';
import type { HarborTrial } from './types.js';

/**
 * Harbor's trial (trial/single_step.py:32-49: the agent, then the verifier in the same
 * environment) on the host environment (no container engine): the workspace is the image's
 * WORKDIR, built from what the Dockerfile copies; inside the sandbox it sits at that path, with
 * /logs beside it (trial/paths.py:35-43). The agent never sees tests/ or solution/: /tests is
 * mounted for the verifier only, after the agent ended, and /solution for the oracle only.
 */

/** The agents polar runs without a model: Harbor's `oracle` (solution/solve.sh) and `nop` (nothing). */
export const BUILTIN_AGENTS = ['oracle', 'nop'] as const;
export type BuiltinAgent = (typeof BUILTIN_AGENTS)[number];

export function isBuiltinAgent(name: string): name is BuiltinAgent {
  return (BUILTIN_AGENTS as readonly string[]).includes(name);
}

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
  const kept = (src: string) => {
    const rel = path.relative(context, src).split(path.sep).join('/');
    return rel === '' || !dockerIgnored(rel, ignore);
  };
  const refuse = (what: string) => {
    throw new StageError('init', `task ${trial.name}: ${what}; the host environment copies only what lies inside environment/ into the workspace`);
  };
  // Every entry a copy carries: left out by .dockerignore, or refused when it is a link to outside.
  const filter = async (src: string): Promise<boolean> => {
    if (!kept(src)) return false;
    if ((await fs.lstat(src)).isSymbolicLink()) {
      const why = linkEscape(context, src);
      if (why) refuse(`environment/${path.relative(context, src)} ${why}`);
    }
    return true;
  };
  for (const c of trial.copies) {
    const to = path.join(dest, c.to);
    if (!kept(c.from)) continue;
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
export function harborPreflight(tasks: readonly RolloutTask[], sandbox: 'bwrap' | 'none', environment: 'host' | 'docker' | 'podman' = 'host'): string[] {
  if (sandbox === 'none' && tasks.some((t) => t.harbor)) {
    throw new PolarError('POLAR_USAGE', "Harbor tasks run in the sandbox, which gives them their container's paths (/app, /tests, /logs); drop --sandbox none");
  }
  return environment === 'host' ? hostNotices(tasks) : [];
}

/** Said once per task before a rollout starts: what the host environment does not reproduce. */
export function hostNotices(tasks: readonly RolloutTask[]): string[] {
  const out: string[] = [];
  for (const t of tasks) {
    const h = t.harbor;
    if (!h) continue;
    const runs = h.skipped;
    if (!h.baseImage && runs.length === 0) continue;
    out.push(
      `notice: task ${t.id}: the host environment does not reproduce ${h.baseImage ? `the base image ${h.baseImage}` : 'the image'}${runs.length > 0 ? ` or these Dockerfile steps:\n  ${runs.map((r) => r.slice(0, 200)).join('\n  ')}` : ''}\n  (the workspace at ${h.workdir} holds the files it copies from environment/; the tools come from this machine)`,
    );
  }
  return out;
}

export interface TrialCommandContext {
  settings: SandboxSettings;
  env: Record<string, string>;
  secrets: readonly string[];
}

/**
 * The oracle: solution/solve.sh in the agent's place (agents/oracle.py:93-124: solution/ at
 * /solution, its output in /logs/agent/oracle.txt, [solution].env, under the agent's timeout).
 * `nop` does nothing (agents/nop.py:25-31).
 */
export async function runBuiltinAgent(
  agent: BuiltinAgent,
  trial: HarborTrial,
  workspace: string,
  ctx: TrialCommandContext,
  network: NetworkMode,
  timeoutMs: number,
): Promise<{ status: 'completed' | 'failed' | 'timeout'; exitCode: number | null; limit: string | null }> {
  if (agent === 'nop') return { status: 'completed', exitCode: 0, limit: null };
  if (ctx.settings.kind === 'none')
    throw new StageError('run', "the oracle needs the sandbox for the task's paths (/app, /solution, /logs); this process runs with --sandbox none");
  if (!trial.solutionDir) throw new StageError('run', `task ${trial.name} has no solution/ for the oracle`);
  const env = { ...ctx.env, DEBIAN_FRONTEND: 'noninteractive', ...resolveEnv(trial.solutionEnv, 'run') };
  const mounts = agentMounts(trial, workspace);
  // The oracle needs no model: no proxy, so `proxy-only` becomes no network at all.
  const jail = await openJail(ctx.settings, {
    cwd: workspace,
    network: network === 'host' ? 'host' : 'none',
    cwdInside: mounts.cwdInside,
    binds: [...mounts.binds, { source: trial.solutionDir, dest: '/solution', readOnly: true }],
  });
  const command = 'bash /solution/solve.sh > /logs/agent/oracle.txt 2>&1';
  const r = await shellIn(jail, workspace, command, env, timeoutMs);
  const limit = await jail.close({ exitCode: r.exitCode, signal: r.signal });
  if (r.failedToStart) throw new StageError('run', `the oracle could not start: ${r.failedToStart}`);
  return { status: r.timedOut ? 'timeout' : r.exitCode === 0 ? 'completed' : 'failed', exitCode: r.exitCode, limit };
}

/** What the verifier gave: the sample's reward, every named reward, and its output. */
export interface VerifierOutcome {
  reward: number;
  rewards: Record<string, number>;
  record: Record<string, unknown>;
}

const OUTPUT_KEPT = 8 * 1024;

/**
 * POSTRUN: tests/ appears at /tests (read-only) only now, in the verifier's own sandbox, with a fresh
 * /logs/verifier (anything the agent left there is gone), and `bash /tests/test.sh` runs under
 * [verifier].timeout_sec and env. Then reward.json (preferred, verifier.py:263-266; its numeric
 * fields, :102-108, with reward.txt as the `reward` when it lacks one, :121-129) or reward.txt (one
 * number, :67-80). No reward file, or one that does not parse, is the verifier's failure: StageError
 * with its output, so the sample ends `error`, not with a reward.
 */
export async function runVerifier(trial: HarborTrial, workspace: string, ctx: TrialCommandContext, network: NetworkMode): Promise<VerifierOutcome> {
  // A worker or agent server run with --sandbox none: the container paths test.sh uses do not exist.
  if (ctx.settings.kind === 'none')
    throw new StageError('post', "a Harbor task's verifier needs the sandbox for its paths (/app, /tests, /logs); this process runs with --sandbox none");
  const logs = logsDir(workspace);
  const verifierDir = path.join(logs, 'verifier');
  await fs.rm(verifierDir, { recursive: true, force: true });
  await fs.mkdir(verifierDir, { recursive: true });
  const env = resolveEnv(trial.verifierEnv, 'post');
  const jail = await openJail(ctx.settings, {
    cwd: workspace,
    network,
    cwdInside: trial.workdir,
    binds: [
      { source: logs, dest: '/logs', readOnly: false },
      { source: trial.testsDir, dest: '/tests', readOnly: true },
    ],
  });
  const timeoutSec = trial.verifierTimeoutSec;
  const r = await shellIn(jail, workspace, 'bash /tests/test.sh', { ...ctx.env, ...env }, timeoutSec * 1000);
  const limit = await jail.close({ exitCode: r.exitCode, signal: r.signal });
  // Values taken from this machine's environment (an LLM judge's API key) are never stored.
  const fromHost = Object.entries(env)
    .filter(([k, v]) => v !== trial.verifierEnv[k])
    .map(([, v]) => v);
  const output = bounded(scrubSecrets(`${r.stdout}${r.stderr ? `\n[stderr]\n${r.stderr}` : ''}`, [...ctx.secrets, ...fromHost]));
  const fail = (what: string, timedOut = false) => new StageError('post', `${what}${output.trim() ? `; its output:\n${output.trim()}` : ''}`, timedOut);
  if (limit) throw fail(`the verifier (tests/test.sh): ${limit}`);
  if (r.timedOut) throw fail(`the verifier (tests/test.sh) timed out after ${timeoutSec} s`, true);
  if (r.failedToStart) throw fail(`the verifier could not start: ${r.failedToStart}`);
  const rewards = await readRewards(verifierDir).catch((err: Error) => {
    throw fail(err.message);
  });
  return {
    reward: rewards.reward,
    rewards: rewards.all,
    record: { type: 'harbor', task: trial.name, exit_code: r.exitCode, rewards: rewards.all, reward_file: rewards.file, output },
  };
}

/** Reads /logs/verifier's reward file as Harbor does; throws a plain Error saying what is wrong. */
export async function readRewards(verifierDir: string): Promise<{ reward: number; all: Record<string, number>; file: string }> {
  const json = await readIf(path.join(verifierDir, 'reward.json'));
  const text = await readIf(path.join(verifierDir, 'reward.txt'));
  if (json === null && text === null) throw new Error('the verifier wrote no reward: neither /logs/verifier/reward.txt nor /logs/verifier/reward.json');
  const fromText = (): number => {
    const n = text!.trim() === '' ? NaN : Number(text!.trim());
    if (!Number.isFinite(n)) throw new Error(`/logs/verifier/reward.txt is not one number: ${JSON.stringify(text!.slice(0, 100))}`);
    return n;
  };
  if (json !== null) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch {
      throw new Error(`/logs/verifier/reward.json is not JSON: ${JSON.stringify(json.slice(0, 100))}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('/logs/verifier/reward.json must be an object ({"reward": x, …})');
    const all: Record<string, number> = {};
    for (const [k, v] of Object.entries(parsed)) if (typeof v === 'number' && Number.isFinite(v)) all[k] = v;
    if (all.reward === undefined && text !== null) all.reward = fromText();
    const keys = Object.keys(all);
    const reward = all.reward ?? (keys.length === 1 ? all[keys[0]!] : undefined);
    if (reward === undefined)
      throw new Error(
        `/logs/verifier/reward.json has ${keys.length === 0 ? 'no numeric field' : `no "reward" field among ${keys.join(', ')}`}: polar needs one number for the sample`,
      );
    return { reward, all, file: 'reward.json' };
  }
  const reward = fromText();
  return { reward, all: { reward }, file: 'reward.txt' };
}

/**
 * The top reward a task can give, for the oracle check: 1 (Harbor's pass), unless task.toml
 * [metadata] says otherwise with `max_reward` (a polar convention for tasks scored on another scale).
 */
export function topReward(metadata: Record<string, unknown>): number {
  const max = metadata.max_reward;
  return typeof max === 'number' && Number.isFinite(max) && max > 0 ? max : 1;
}

/**
 * task.toml env values `${VAR}` and `${VAR:-default}` come from this machine's environment when the
 * command runs (never stored with the task), as Harbor resolves them (utils/env.py:97-127); other
 * values are literal. A variable that is unset and has no default is the stage's error.
 */
export function resolveEnv(env: Record<string, string>, stage: 'run' | 'post', host: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    const m = /^\$\{([^}:]+)(?::-(.*))?\}$/s.exec(v);
    if (!m) out[k] = v;
    else if (host[m[1]!] !== undefined) out[k] = host[m[1]!]!;
    else if (m[2] !== undefined) out[k] = m[2];
    else throw new StageError(stage, `task.toml sets ${k} from $${m[1]}, which is not set in polar's environment`);
  }
  return out;
}

/** A command in the task's sandbox (Harbor tasks always run sandboxed: their paths are the container's). */
async function shellIn(jail: Jail, workspace: string, command: string, env: Record<string, string>, timeoutMs: number): Promise<ShellResult> {
  return runShell(command, { cwd: workspace, env, timeoutMs, wrap: (c: HarnessCommand) => jail.wrap(c) });
}

/**
 * A reward file as the verifier left it. The agent's code may have run under test.sh, so a symlink
 * there could point at any host file polar can read (and polar would quote it in an error): only a
 * regular file is read, opened without following a link.
 */
async function readIf(file: string): Promise<string | null> {
  let st: Awaited<ReturnType<typeof fs.lstat>>;
  try {
    st = await fs.lstat(file);
  } catch {
    return null;
  }
  if (!st.isFile()) throw new Error(`${file.replace(/^.*-logs\//, '/logs/')} is not a regular file`);
  const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  try {
    return (await handle.read({ buffer: Buffer.alloc(Math.min(st.size, 1024 * 1024)), position: 0 })).buffer.toString('utf8');
  } finally {
    await handle.close();
  }
}

function bounded(text: string): string {
  return text.length > OUTPUT_KEPT ? `…${text.slice(text.length - OUTPUT_KEPT)}` : text;
}
