import fs from 'node:fs/promises';
import path from 'node:path';
import { PROXY_SOCKET_INSIDE } from '../../sandbox/args.js';
import type { SandboxLimits } from '../../sandbox/index.js';
import { scrubSecrets } from '../../store/redact.js';
import type { RolloutTask } from '../task-file.js';
import { StageError } from '../stage-error.js';
import type { Engine } from './container-args.js';
import { ensureImage, runtimeMounts, type SampleContainer, startSampleContainer } from './container.js';
import { type BuiltinAgent, logsDir, readRewards, resolveEnv, type VerifierOutcome } from './trial.js';
import type { HarborTrial } from './types.js';

/**
 * Harbor's trial in the task's own container (trial/single_step.py: the agent, then the verifier,
 * in one environment): the same steps as trial.ts on the host, through `<engine> exec` and `cp`.
 * tests/ is copied in only after the agent ended; /logs/verifier is copied out and read on the host.
 */

const OUTPUT_KEPT = 8 * 1024;

/**
 * INIT: the task's image (built once per content) and the sample's container. The internet is the
 * task's to allow (task.toml); otherwise `--network none`, the bridge being the harness's one way
 * to the capture proxy.
 */
export async function openTaskContainer(opts: {
  engine: Engine;
  task: RolloutTask;
  sampleId: string;
  limits: SandboxLimits;
  proxySocket: string | null;
  /** Host folders the harness writes, each at its path inside (its private home, at the fixed home path). */
  writable: readonly { source: string; dest: string }[];
  readOnly: readonly string[];
  onNotice: (line: string) => void;
}): Promise<SampleContainer> {
  const trial = opts.task.harbor!;
  const image = await ensureImage(opts.engine, trial, opts.onNotice);
  for (const d of opts.writable) await fs.mkdir(d.source, { recursive: true, mode: 0o700 });
  const container = await startSampleContainer({
    engine: opts.engine,
    sampleId: opts.sampleId,
    image,
    trial,
    internet: trial.agentNetwork === 'public' || opts.task.network === 'host',
    limits: withTaskMemory(opts.limits, trial.memoryBytes),
    cpus: trial.cpus ?? null,
    proxySocket: opts.proxySocket,
    mounts: [...opts.writable.map((w) => ({ ...w, readOnly: false })), ...opts.readOnly.map((p) => ({ source: p, dest: p, readOnly: true }))],
  });
  // /logs/agent is the agent's to write: its user's when task.toml names one.
  const owner = trial.agentUser !== undefined ? ` && chown ${trial.agentUser} /logs/agent` : '';
  const mk = await container.shell(`mkdir -p /logs/agent /logs/verifier${owner}`, {}, 60_000);
  if (mk.code !== 0) {
    await container.remove();
    throw new StageError('init', `could not make /logs in the container: ${mk.stderr.trim()}`);
  }
  if (trial.agentUser !== undefined) {
    // What polar mounts sits at its host path, under the image's own folders: a checkout in /root
    // puts polar's node_modules under the image's /root (0700), which the task's user cannot cross.
    // Let it cross (not read) them, in this container only.
    const mounted = [...runtimeMounts().map((m) => m.dest), PROXY_SOCKET_INSIDE, ...opts.writable.map((w) => w.dest), ...opts.readOnly];
    const crossed = await container.shell('for d in "$@"; do [ -d "$d" ] && chmod o+x "$d"; done; true', {}, 60_000, undefined, ancestors(mounted));
    if (crossed.code !== 0) {
      await container.remove();
      throw new StageError('init', `could not open the way to polar's mounts for ${trial.agentUser}: ${crossed.stderr.trim()}`);
    }
  }
  if (trial.agentUser !== undefined && opts.proxySocket) {
    // The harness (and its bridge) run as that user, and the socket is root's 0600. Its folder stays
    // 0700 on the host, so opening the socket itself reaches only containers it is mounted into; the
    // session key still gates every call.
    await fs.chmod(opts.proxySocket, 0o666);
  }
  if (trial.agentUser !== undefined && opts.writable.length > 0) {
    // The harness's private home is mounted from the host: the agent's user must own it.
    const ids = await container.shell(`echo "$(id -u ${trial.agentUser}):$(id -g ${trial.agentUser})"`, {}, 60_000);
    const m = /^(\d+):(\d+)$/.exec(ids.stdout.trim());
    if (ids.code !== 0 || !m) {
      await container.remove();
      throw new StageError('init', `task.toml's agent.user ${trial.agentUser} is not a user in the image: ${ids.stderr.trim()}`);
    }
    for (const d of opts.writable) await chownTree(d.source, Number(m[1]), Number(m[2]));
  }
  return container;
}

/** Every folder above these paths, below `/`, once each. */
export function ancestors(paths: readonly string[]): string[] {
  const out = new Set<string>();
  for (const p of paths) for (let d = path.posix.dirname(p); d !== '/' && d !== '.'; d = path.posix.dirname(d)) out.add(d);
  return [...out].sort();
}

/** polar's memory cap and the task's own ([environment].memory_mb): the lower one (0 is no cap). */
export function withTaskMemory(limits: SandboxLimits, taskBytes: number | undefined): SandboxLimits {
  if (taskBytes === undefined) return limits;
  const polar = limits.maxMemoryBytes;
  return { ...limits, maxMemoryBytes: polar > 0 ? Math.min(polar, taskBytes) : taskBytes };
}

async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await fs.chown(dir, uid, gid);
  for (const e of await fs.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) await chownTree(p, uid, gid);
    else await fs.lchown(p, uid, gid);
  }
}

/**
 * The container's WORKDIR as a host folder: at INIT the workspace's starting state (the image's
 * WORKDIR, its RUN steps' files included, so they are not counted as the agent's), at POSTRUN its
 * end state, so the sample's diff is the agent's changes as on the host. polar's `.git` (the
 * baseline) stays; one the container holds (the agent's to change) is not copied over it.
 */
export async function copyWorkdirOut(container: SampleContainer, dest: string): Promise<void> {
  const out = `${dest}-out`;
  await fs.rm(out, { recursive: true, force: true });
  try {
    await container.copyOut(container.workdir, out);
    await fs.mkdir(dest, { recursive: true });
    for (const name of await fs.readdir(dest)) if (name !== '.git') await fs.rm(path.join(dest, name), { recursive: true, force: true });
    const hasGit = await fs.stat(path.join(dest, '.git')).then(
      () => true,
      () => false,
    );
    for (const name of await fs.readdir(out)) {
      if (name === '.git' && hasGit) continue;
      await fs.rename(path.join(out, name), path.join(dest, name));
    }
  } finally {
    await fs.rm(out, { recursive: true, force: true });
  }
}

/** A container sample's workspace at INIT: its WORKDIR, and the /logs folder beside it as on the host. */
export async function containerStartingState(container: SampleContainer, dest: string): Promise<void> {
  await copyWorkdirOut(container, dest);
  for (const d of ['agent', 'verifier']) await fs.mkdir(path.join(logsDir(dest), d), { recursive: true });
}

/** The oracle in the container: solution/ copied to /solution, solve.sh under the agent's timeout. */
export async function runContainerAgent(
  agent: BuiltinAgent,
  trial: HarborTrial,
  container: SampleContainer,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<{ status: 'completed' | 'failed' | 'timeout'; exitCode: number | null; limit: string | null }> {
  if (agent === 'nop') return { status: 'completed', exitCode: 0, limit: null };
  if (!trial.solutionDir) throw new StageError('run', `task ${trial.name} has no solution/ for the oracle`);
  await container.copyIn(trial.solutionDir, '/solution').catch((err: Error) => {
    throw new StageError('run', err.message);
  });
  const r = await container.shell(
    'bash /solution/solve.sh > /logs/agent/oracle.txt 2>&1',
    { ...env, DEBIAN_FRONTEND: 'noninteractive', ...resolveEnv(trial.solutionEnv, 'run') },
    timeoutMs,
    trial.agentUser,
  );
  if (r.code === null && !r.timedOut) throw new StageError('run', `the oracle could not start: ${r.stderr.trim()}`);
  const limit = r.code === 137 && !r.timedOut ? 'killed (exit 137: the memory limit, or the container was stopped)' : null;
  return { status: r.timedOut ? 'timeout' : r.code === 0 ? 'completed' : 'failed', exitCode: r.code, limit };
}

/**
 * POSTRUN in the container: a fresh /logs/verifier, tests/ copied to /tests only now, `bash
 * /tests/test.sh` under [verifier].timeout_sec, then /logs/verifier copied out beside the workspace
 * and read as on the host (trial.ts readRewards: regular files only, never a link).
 */
export async function runContainerVerifier(
  trial: HarborTrial,
  container: SampleContainer,
  workspace: string,
  env: Record<string, string>,
  secrets: readonly string[],
): Promise<VerifierOutcome> {
  const asPost = (err: Error) => {
    throw err instanceof StageError ? err : new StageError('post', err.message);
  };
  const owner = trial.verifierUser !== undefined ? ` && chown ${trial.verifierUser} /logs/verifier` : '';
  const reset = await container.shell(`rm -rf /logs/verifier /tests && mkdir -p /logs/verifier${owner}`, {}, 60_000);
  if (reset.code !== 0) throw new StageError('post', `could not reset /logs/verifier in the container: ${reset.stderr.trim()}`);
  await container.copyIn(trial.testsDir, '/tests').catch(asPost);
  const taskEnv = resolveEnv(trial.verifierEnv, 'post');
  const timeoutSec = trial.verifierTimeoutSec;
  const r = await container.shell('bash /tests/test.sh', { ...env, ...taskEnv }, timeoutSec * 1000, trial.verifierUser);
  const fromHost = Object.entries(taskEnv)
    .filter(([k, v]) => v !== trial.verifierEnv[k])
    .map(([, v]) => v);
  const raw = scrubSecrets(`${r.stdout}${r.stderr ? `\n[stderr]\n${r.stderr}` : ''}`, [...secrets, ...fromHost]);
  const output = raw.length > OUTPUT_KEPT ? `…${raw.slice(raw.length - OUTPUT_KEPT)}` : raw;
  const fail = (what: string, timedOut = false) => new StageError('post', `${what}${output.trim() ? `; its output:\n${output.trim()}` : ''}`, timedOut);
  if (r.timedOut) throw fail(`the verifier (tests/test.sh) timed out after ${timeoutSec} s`, true);
  if (r.code === null) throw fail('the verifier could not start');
  if (r.code === 137) throw fail('the verifier (tests/test.sh) was killed (exit 137: the memory limit)');
  const verifierDir = path.join(logsDir(workspace), 'verifier');
  await fs.rm(verifierDir, { recursive: true, force: true });
  await container.copyOut('/logs/verifier', verifierDir).catch(asPost);
  const rewards = await readRewards(verifierDir).catch((err: Error) => {
    throw fail(err.message);
  });
  return {
    reward: rewards.reward,
    rewards: rewards.all,
    record: {
      type: 'harbor',
      task: trial.name,
      environment: container.engine,
      exit_code: r.code,
      rewards: rewards.all,
      reward_file: rewards.file,
      output,
    },
  };
}
