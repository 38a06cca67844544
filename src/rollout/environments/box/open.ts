import fs from 'node:fs/promises';
import path from 'node:path';
import { PROXY_SOCKET_INSIDE } from '../../../sandbox/args.js';
import type { SandboxLimits } from '../../../sandbox/index.js';
import { runtimeMounts } from '../../../sandbox/runtime-mounts.js';
import type { Mount } from '../../boxes/types.js';
import { logsDir } from '../../harbor/trial.js';
import { StageError } from '../../stage-error.js';
import { taskImage } from './images.js';
import { boxEnv, boxNetwork, mainHealthcheck } from './services.js';
import type { AgentBox, BoxSample } from './state.js';

/**
 * Harbor's trial in the task's own box (trial/single_step.py: the agent, then the verifier, in one
 * environment): the same steps as trial.ts on the host, through the provider's exec and copies.
 * tests/ is copied in only after the agent ended; /logs/verifier is copied out and read on the host.
 */

/** The host folders a sample's agent box mounts: the harness's private home (written), its runtime (read). */
export interface AgentMounts {
  writable: readonly { source: string; dest: string }[];
  readOnly: readonly string[];
}

/**
 * INIT: the task's image (built once per content) and the sample's box. The internet is the
 * task's to allow (task.toml); otherwise no network, the bridge being the harness's one way to the
 * capture proxy. A compose task's box joins its services' network as `main`.
 */
export async function openAgentBox(s: BoxSample, mounts: AgentMounts): Promise<AgentBox> {
  const { trial, provider, deps, spec } = s;
  const image = await taskImage(s);
  for (const d of mounts.writable) await fs.mkdir(d.source, { recursive: true, mode: 0o700 });
  const internet = trial.agentNetwork === 'public' || spec.task.network === 'host';
  const healthcheck = mainHealthcheck(s);
  const network = s.services ? s.services.mainNetwork : await boxNetwork(s, spec.sampleId, internet);
  const box = await provider.start({
    id: spec.sampleId,
    image,
    workdir: trial.workdir,
    hostname: 'polar-sandbox',
    network,
    limits: withTaskMemory(deps.sandbox.limits, trial.memoryBytes),
    cpus: trial.cpus ?? null,
    mounts: [
      ...runtimeMounts(),
      ...(deps.proxySocket ? [{ source: deps.proxySocket, dest: PROXY_SOCKET_INSIDE, readOnly: false }] : []),
      ...mounts.writable.map((w): Mount => ({ ...w, readOnly: false })),
      ...mounts.readOnly.map((p): Mount => ({ source: p, dest: p, readOnly: true })),
    ],
    ...(healthcheck ? { healthcheck } : {}),
    env: boxEnv(s),
  });
  try {
    await readyForAgent(s, box, mounts);
  } catch (err) {
    await box.remove();
    throw err;
  }
  return box;
}

/** /logs made, and where the task names an agent user, the way to polar's mounts and its home opened to it. */
async function readyForAgent(s: BoxSample, box: AgentBox, mounts: AgentMounts): Promise<void> {
  const user = s.trial.agentUser;
  // /logs/agent is the agent's to write: its user's when task.toml names one, else the image's own
  // user's (an image whose USER is not root), as when that user made it.
  const owner = user ?? (await imageUser(box));
  const chown = owner !== null ? ' && chown -- "$1" /logs/agent' : '';
  const mk = await box.sh(`mkdir -p /logs/agent /logs/verifier${chown}`, [owner ?? '']);
  if (mk.code !== 0) throw new StageError('init', `could not make /logs in the container: ${mk.stderr.trim()}`);
  if (user === undefined) return;
  // What polar mounts sits at its host path, under the image's own folders: a checkout in /root
  // puts polar's node_modules under the image's /root (0700), which the task's user cannot cross.
  // Let it cross (not read) them, in this container only.
  const mounted = [...runtimeMounts().map((m) => m.dest), PROXY_SOCKET_INSIDE, ...mounts.writable.map((w) => w.dest), ...mounts.readOnly];
  const crossed = await box.sh('for d in "$@"; do [ -d "$d" ] && chmod o+x "$d"; done; true', ancestors(mounted));
  if (crossed.code !== 0) throw new StageError('init', `could not open the way to polar's mounts for ${user}: ${crossed.stderr.trim()}`);
  // The harness (and its bridge) run as that user, and the socket is root's 0600. Its folder stays
  // 0700 on the host, so opening the socket itself reaches only containers it is mounted into; the
  // session key still gates every call.
  if (s.deps.proxySocket) await fs.chmod(s.deps.proxySocket, 0o666);
  if (mounts.writable.length > 0) await homeToUser(box, user, mounts.writable);
}

/** The image's default user as `uid:gid`, or null where it is root (or cannot say). */
async function imageUser(box: AgentBox): Promise<string | null> {
  const r = await box.shell('echo "$(id -u):$(id -g)"', {}, 60_000);
  const ids = r.stdout.trim();
  return r.code === 0 && /^\d+:\d+$/.test(ids) && ids !== '0:0' ? ids : null;
}

/** The harness's private home is mounted from the host: the agent's user must own it. */
async function homeToUser(box: AgentBox, user: string, writable: AgentMounts['writable']): Promise<void> {
  const ids = await box.sh('echo "$(id -u "$1"):$(id -g "$1")"', [user]);
  const m = /^(\d+):(\d+)$/.exec(ids.stdout.trim());
  if (ids.code !== 0 || !m) throw new StageError('init', `task.toml's agent.user ${user} is not a user in the image: ${ids.stderr.trim()}`);
  for (const d of writable) await chownTree(d.source, Number(m[1]), Number(m[2]));
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
export async function copyWorkdirOut(container: AgentBox, dest: string): Promise<void> {
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
export async function containerStartingState(container: AgentBox, dest: string): Promise<void> {
  await copyWorkdirOut(container, dest);
  for (const d of ['agent', 'verifier']) await fs.mkdir(path.join(logsDir(dest), d), { recursive: true });
}
