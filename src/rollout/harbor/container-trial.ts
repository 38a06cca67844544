import fs from 'node:fs/promises';
import path from 'node:path';
import { PROXY_SOCKET_INSIDE } from '../../sandbox/args.js';
import type { SandboxLimits } from '../../sandbox/index.js';
import type { RolloutTask } from '../task-file.js';
import { StageError } from '../stage-error.js';
import type { Engine } from './container-args.js';
import { ensureImage, runtimeMounts, type SampleContainer, startSampleContainer } from './container.js';
import { logsDir } from './trial.js';

/**
 * Harbor's trial in the task's own container (trial/single_step.py: the agent, then the verifier,
 * in one environment): the same steps as trial.ts on the host, through `<engine> exec` and `cp`.
 * tests/ is copied in only after the agent ended; /logs/verifier is copied out and read on the host.
 */

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
    ...(trial.healthcheck ? { healthcheck: trial.healthcheck } : {}),
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
