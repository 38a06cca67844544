import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../../core/errors.js';
import { fileSizeUlimit, type SandboxLimits } from '../../sandbox/index.js';
import type { BoxNetwork, Mount } from './types.js';

/**
 * The argv polar hands a container engine's CLI (`docker` or `podman`; they agree on every flag
 * used here) for one box: pure builders, so what reaches the engine is tested without one. The
 * process side (spawning them) is engine-run.ts; the provider, engine-cli.ts.
 */
export type Engine = 'docker' | 'podman';

/**
 * A content hash of the build context (every file's path, executable bit and bytes; a symlink's
 * target) and the Dockerfile: the same task folder anywhere gives the same hash, one changed byte a
 * new one. So the image is built once per task content, not per run or per machine path.
 */
export function contextHash(contextDir: string): string {
  const h = createHash('sha256');
  const walk = (dir: string, rel: string) => {
    const entries = fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const abs = path.join(dir, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isSymbolicLink()) h.update(`L\0${r}\0${fs.readlinkSync(abs)}\0`);
      else if (e.isDirectory()) {
        h.update(`D\0${r}\0`);
        walk(abs, r);
      } else if (e.isFile()) {
        const exec = (fs.statSync(abs).mode & 0o111) !== 0 ? 'x' : '-';
        const data = fs.readFileSync(abs);
        h.update(`F\0${r}\0${exec}\0${data.length}\0`);
        h.update(data);
      }
    }
  };
  walk(contextDir, '');
  return h.digest('hex');
}

/** `polar-harbor/<task>:<hash>`: a repository name the engines accept (lowercase, [a-z0-9._-]). */
export function imageTag(taskName: string, hash: string): string {
  const repo =
    taskName
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[._-]+|[._-]+$/g, '')
      .slice(0, 100) || 'task';
  return `polar-harbor/${repo}:${hash.slice(0, 16)}`;
}

/** A container name from a sample id: [a-zA-Z0-9][a-zA-Z0-9_.-]* as both engines require. */
export function containerName(sampleId: string): string {
  return `polar-${sampleId.replace(/[^a-zA-Z0-9_.-]+/g, '-')}`;
}

export function inspectImageArgs(tag: string): string[] {
  return ['image', 'inspect', tag];
}

export function buildArgs(tag: string, contextDir: string, dockerfile = 'Dockerfile'): string[] {
  return ['build', '-t', tag, '-f', path.join(contextDir, dockerfile), contextDir];
}

/**
 * A box's container. No `--workdir`: podman 4.3 refuses to start a container whose `--workdir`
 * is missing from the image ("workdir /app does not exist"), which is Harbor's own hello-world
 * (`WORKDIR /app` that no later step fills) and any image without a WORKDIR, where polar puts the
 * workspace at /app. Harbor starts it with none either (docker-compose-build.yaml:1-6: the image's
 * own WORKDIR and `sh -c "sleep infinity"`; its execs pass `-w` only, docker.py:695-705); polar
 * makes its workspace folder as root right after the start (engine-cli.ts) and every exec
 * passes `-w` (execArgs).
 */
export interface RunSpec {
  name: string;
  image: string;
  /** `none`: the container's own network namespace with only lo (the bridge is its way to the proxy). */
  network: BoxNetwork;
  mounts: readonly Mount[];
  limits: SandboxLimits;
  /** task.toml [environment].cpus, when it says. */
  cpus: number | null;
  /** Names of the box's own variables: the engine reads each value from its client's environment. */
  envNames?: readonly string[];
  command?: readonly string[];
  entrypoint?: readonly string[];
  hostname?: string;
}

/**
 * The long-lived container of one box: every stage runs in it with `exec`. `sleep infinity`
 * keeps it up (as Harbor's own compose file does); `--rm` removes it once stopped; `--init` reaps
 * what the agent leaves behind. The flags' caps become the engine's: pids, memory. The file size cap
 * is set by each `exec` (execArgs): an engine's `--ulimit` replaces its configured default rlimits,
 * and where the engine may not raise those (podman in a container without CAP_SYS_RESOURCE, whose
 * configured nofile/nproc are what lets it start at all) one `--ulimit fsize` made every run fail.
 */
export function runArgs(spec: RunSpec): string[] {
  const args = ['run', '-d', '--rm', '--init', '--name', spec.name];
  // A fixed hostname, as bwrap's: the engine's default is the container id, new for every sample,
  // and a harness may put the hostname in its first prompt (one GRPO group needs one prompt).
  if (spec.hostname) args.push('--hostname', spec.hostname);
  args.push(...networkArgs(spec.network));
  args.push('--security-opt', 'no-new-privileges');
  const l = spec.limits;
  if (l.maxProcs > 0) args.push('--pids-limit', String(l.maxProcs));
  if (l.maxMemoryBytes > 0) args.push('--memory', `${l.maxMemoryBytes}b`);
  if (spec.cpus !== null && spec.cpus > 0) args.push('--cpus', String(spec.cpus));
  for (const m of spec.mounts) args.push('-v', volume(m));
  for (const k of spec.envNames ?? []) args.push('-e', k);
  // The CLI's --entrypoint takes one program: the rest of a list entrypoint leads the command, which
  // is what the engine runs after it anyway (compose's own list form). [] clears the image's.
  const [program, ...rest] = spec.entrypoint ?? [];
  if (spec.entrypoint) args.push('--entrypoint', program ?? '');
  // Harbor's keep-alive exactly (docker-compose-build.yaml:6): it replaces the image's CMD only, so
  // the image's ENTRYPOINT runs with it as its arguments and starts the task's services.
  args.push(spec.image, ...rest, ...(spec.command ?? ['sh', '-c', 'sleep infinity']));
  return args;
}

/** `--network none`, the engine's default network (nothing), or a named network with the box's aliases on it. */
export function networkArgs(network: BoxNetwork): string[] {
  if (network.kind === 'none') return ['--network', 'none'];
  if (network.kind === 'internet') return [];
  return ['--network', network.network, ...network.aliases.flatMap((a) => ['--network-alias', a])];
}

/**
 * A network of boxes; `--internal`: they reach each other and nothing else. podman routes every
 * bridge network through the host, so a box on one network reached a box on another by its address
 * (network-isolation.test.ts): its `isolate` option blocks traffic between networks that have it, and
 * every network polar makes has it. docker isolates user-defined bridge networks from each other
 * by default.
 */
export function networkCreateArgs(engine: Engine, name: string, internal: boolean): string[] {
  return ['network', 'create', ...(engine === 'podman' ? ['-o', 'isolate=true'] : []), ...(internal ? ['--internal'] : []), name];
}

/** `-v SRC:DEST[:ro]`; a path with `:` or `,` would be split by the engine, so it is refused. */
export function volume(m: Mount): string {
  for (const p of [m.source, m.dest]) {
    if (!path.isAbsolute(p)) throw new PolarError('POLAR_USAGE', `a container mount needs absolute paths: ${p}`);
    if (/[:,]/.test(p)) throw new PolarError('POLAR_USAGE', `a container mount cannot hold ':' or ',' in its path: ${p}`);
  }
  return `${m.source}:${m.dest}${m.readOnly ? ':ro' : ''}`;
}

export interface ExecSpec {
  name: string;
  workdir: string;
  /**
   * Variable names passed as `-e NAME` (no value): the engine reads each value from its own
   * environment, so an API key never appears in the host's process list.
   */
  envNames: readonly string[];
  /** Keep stdin open (a harness that reads its prompt from it). */
  interactive: boolean;
  /** Run as this user (a name or uid, task.toml's [agent].user / [verifier].user); absent: the image's. */
  user?: string;
  /**
   * The file size cap: the command starts under `sh -c 'ulimit -f N && exec "$@"'` (soft and hard;
   * the container has no CAP_SYS_RESOURCE to raise it again). Absent or 0: no cap.
   */
  maxFileSizeBytes?: number;
}

export function execArgs(spec: ExecSpec, argv: readonly string[]): string[] {
  const args = ['exec'];
  if (spec.interactive) args.push('-i');
  args.push('-w', spec.workdir);
  if (spec.user !== undefined) args.push('-u', spec.user);
  for (const k of spec.envNames) args.push('-e', k);
  args.push(spec.name);
  const size = spec.maxFileSizeBytes ?? 0;
  if (size > 0) args.push('sh', '-c', `${fileSizeUlimit(size)} && exec "$@"`, 'sh');
  args.push(...argv);
  return args;
}

/** Copies a host folder's contents to DEST inside (DEST must exist: `mkdir -p` it first). */
export function copyInArgs(name: string, hostDir: string, dest: string): string[] {
  return ['cp', `${hostDir.replace(/\/+$/, '')}/.`, `${name}:${dest}`];
}

/** Copies the contents of SRC inside to an existing host folder. */
export function copyOutArgs(name: string, src: string, hostDir: string): string[] {
  return ['cp', `${name}:${src.replace(/\/+$/, '')}/.`, hostDir];
}

export function removeArgs(name: string): string[] {
  return ['rm', '-f', name];
}
