import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HarnessCommand } from '../../harness/types.js';
import { bridged } from '../../sandbox/bridge.js';
import { PROXY_SOCKET_INSIDE } from '../../sandbox/args.js';
import { type Jail, rlimitReason, type SandboxLimits } from '../../sandbox/index.js';
import { StageError } from '../stage-error.js';
import {
  buildArgs,
  containerName,
  contextHash,
  copyInArgs,
  copyOutArgs,
  type Engine,
  execArgs,
  imageTag,
  inspectImageArgs,
  type Mount,
  removeArgs,
  runArgs,
} from './container-args.js';
import type { HarborTrial } from './types.js';

/**
 * A Harbor task's trial in its own image, through a container engine's CLI (argv from
 * container-args.ts). test/e2e/harbor-container.test.ts runs it where `<engine> info` works and
 * skips with the reason elsewhere.
 */

export interface EngineResult {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

const OUTPUT_KEPT = 8 * 1024;

/** Runs `<engine> args…` and collects its output (the tail, bounded). */
export function runEngine(engine: Engine, args: readonly string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<EngineResult> {
  return new Promise((resolve) => {
    const child = spawn(engine, args, { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const keep = (s: string, d: Buffer) => (s + d.toString()).slice(-OUTPUT_KEPT);
    child.stdout.on('data', (d: Buffer) => {
      stdout = keep(stdout, d);
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr = keep(stderr, d);
    });
    const timer = opts.timeoutMs
      ? setTimeout(() => {
          timedOut = true;
          child.kill('SIGKILL');
        }, opts.timeoutMs)
      : undefined;
    child.on('error', (err) => {
      if (timer) clearTimeout(timer);
      resolve({ code: null, stdout, stderr: `${stderr}${err.message}`, timedOut });
    });
    child.on('close', (code) => {
      if (timer) clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

// One build per image tag per process: the samples of a task wait on the same build.
const builds = new Map<string, Promise<string>>();

/**
 * The task's image, built from environment/ once per content (tagged `polar-harbor/<task>:<hash>`;
 * `image inspect` finding it skips the build, so a later run, or another process, reuses it).
 */
export function ensureImage(engine: Engine, trial: HarborTrial, onNotice: (line: string) => void): Promise<string> {
  return ensureContextImage(engine, trial.name, path.join(trial.dir, 'environment'), onNotice);
}

/**
 * An image built from a build context (its Dockerfile) once per content: the task's environment/,
 * or tests/ for Harbor's separate verifier (`polar-harbor/<task>-verifier:<hash>`).
 */
export function ensureContextImage(engine: Engine, name: string, context: string, onNotice: (line: string) => void): Promise<string> {
  const tag = imageTag(name, contextHash(context));
  const key = `${engine}\0${tag}`;
  let build = builds.get(key);
  if (!build) {
    build = (async () => {
      if ((await runEngine(engine, inspectImageArgs(tag))).code === 0) return tag;
      onNotice(`building ${tag} from ${context} with ${engine}`);
      const r = await runEngine(engine, buildArgs(tag, context));
      if (r.code !== 0) {
        // The engine says why last (a base image it cannot pull, a failing RUN): that goes first.
        const output = (r.stdout + r.stderr).trim();
        const cause =
          output
            .split('\n')
            .filter((l) => l.trim())
            .pop() ?? '';
        throw new StageError(
          'init',
          `${engine} build of ${context} failed (exit ${r.code}): ${cause} (--environment host runs the task in polar's sandbox without its image)\n${output}`,
        );
      }
      return tag;
    })();
    // A failed build is tried again by the next sample rather than remembered.
    build.catch(() => builds.delete(key));
    builds.set(key, build);
  }
  return build;
}

/**
 * The harness's CLI and the Node runtime it and the bridge run on, read-only at their own paths:
 * the Node install prefix (its binary alone where that prefix is a system folder like /usr, which
 * would hide the image's own), and the node_modules polar sits in (the harness CLIs beside it).
 */
export function runtimeMounts(extra: readonly string[] = []): Mount[] {
  const polarModules = path.join(fileURLToPath(new URL('../../../', import.meta.url)), 'node_modules');
  const paths = [nodePrefix(process.execPath), ...(fs.existsSync(polarModules) ? [polarModules] : []), ...extra];
  return [...new Set(paths)].map((p) => ({ source: p, dest: p, readOnly: true }));
}

/** What to mount for a Node binary: its install prefix, or the binary alone where that is a system folder. */
export function nodePrefix(nodeBin: string): string {
  const node = fs.realpathSync(nodeBin);
  const prefix = path.dirname(path.dirname(node));
  return ['/', '/usr', '/usr/local', '/bin', '/opt'].includes(prefix) ? node : prefix;
}

/** An image's WORKDIR (`/` when it sets none, or the engine cannot say). */
export async function imageWorkdir(engine: Engine, image: string): Promise<string> {
  const r = await runEngine(engine, ['image', 'inspect', '--format', '{{.Config.WorkingDir}}', image]);
  const dir = r.code === 0 ? r.stdout.trim() : '';
  return dir.startsWith('/') ? dir : '/';
}

/** Prints every pid in the container but 1 and its own. */
const LIST_OTHERS = 'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" != 1 ] && [ "$p" != "$$" ] && echo "$p"; done; true';

/**
 * Stops every process but init, the keep-alive and itself, again until no new one appears (a
 * stopped process cannot fork, so a fork loop ends), then kills them all and prints how many.
 */
export function killStraysScript(keep: readonly string[]): string {
  return [
    `keep=" 1 $$ ${keep.join(' ')} "; stopped=" "`,
    'while :; do new=0; for d in /proc/[0-9]*; do p=${d#/proc/}; case "$keep$stopped" in *" $p "*) continue;; esac; kill -STOP "$p" 2>/dev/null; stopped="$stopped$p "; new=1; done; [ $new = 0 ] && break; done',
    'n=0; for p in $stopped; do kill -KILL "$p" 2>/dev/null && n=$((n+1)); done; echo $n',
  ].join('\n');
}

/** The pids besides init in a container that has just started (its keep-alive), or why not. */
async function ownProcesses(engine: Engine, name: string): Promise<string[] | string> {
  for (let i = 0; i < 50; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 100));
    const r = await runEngine(engine, execArgs({ name, workdir: '/', envNames: [], interactive: false }, ['sh', '-c', LIST_OTHERS]));
    if (r.code !== 0) return r.stderr.trim();
    const pids = r.stdout.split(/\s+/).filter((p) => /^\d+$/.test(p));
    if (pids.length > 0) return pids;
  }
  return 'none after 5 s';
}

export interface SampleContainerSpec {
  engine: Engine;
  sampleId: string;
  image: string;
  trial: HarborTrial;
  /** task.toml allows the internet: the engine's default network; else `--network none`. */
  internet: boolean;
  limits: SandboxLimits;
  cpus: number | null;
  /** The capture proxy's Unix socket, mounted where the bridge inside expects it. */
  proxySocket: string | null;
  /** More host paths at their own paths (the harness's private home). */
  mounts?: readonly Mount[];
}

/** One sample's long-lived container: started at INIT, every stage `exec`s in it, removed at the end. */
export interface SampleContainer {
  readonly engine: Engine;
  readonly name: string;
  readonly workdir: string;
  /** Runs `bash -c COMMAND [args…]` inside with these variables, as `user` (default: the image's user). */
  shell(command: string, env: Record<string, string>, timeoutMs: number, user?: string, args?: readonly string[]): Promise<EngineResult>;
  /** A Jail whose wrap runs the command inside as `user` (behind the proxy bridge when `proxyPort` is given). */
  jail(proxyPort: number | null, user?: string): Jail;
  /**
   * Stops, then kills, every process in the container but its init and keep-alive: what the agent
   * left running (a loop that rewrites /logs/verifier/reward.json while the verifier runs, say).
   * Run after the agent, before its workspace is read and the verifier starts. Returns how many.
   */
  killStrays(): Promise<number>;
  copyIn(hostDir: string, dest: string): Promise<void>;
  copyOut(src: string, hostDir: string): Promise<void>;
  /** `<engine> cp` of one path, file or folder, to a host path that does not exist yet; false when SRC does not exist inside. */
  copyPathOut(src: string, hostPath: string): Promise<boolean>;
  /** `<engine> cp` of a host file or folder to DEST inside, which must not exist (its parent must). */
  copyPathIn(hostPath: string, dest: string): Promise<void>;
  remove(): Promise<void>;
}

/** Starts the sample's container and notes its own processes; removes it again if they cannot be read. */
export async function startSampleContainer(spec: SampleContainerSpec): Promise<SampleContainer> {
  const { engine } = spec;
  const name = containerName(spec.sampleId);
  const mounts: Mount[] = [
    ...runtimeMounts(),
    ...(spec.proxySocket ? [{ source: spec.proxySocket, dest: PROXY_SOCKET_INSIDE, readOnly: false }] : []),
    ...(spec.mounts ?? []),
  ];
  const started = await runEngine(
    engine,
    runArgs({
      name,
      image: spec.image,
      workdir: spec.trial.workdir,
      network: spec.internet ? 'default' : 'none',
      mounts,
      limits: spec.limits,
      cpus: spec.cpus,
    }),
  );
  if (started.code !== 0)
    throw new StageError(
      'init',
      `${engine} run ${spec.image} failed (exit ${started.code}): ${started.stderr.trim()}. \`${engine} info\` works here but it cannot start this container: fix the engine (\`${engine} run --rm ${spec.image} true\` shows the same), or pass --environment host`,
    );
  // The container's own processes, read before anything of the task's runs: its init (1) and the
  // keep-alive (`sleep infinity`, whose pid depends on the engine's init). Only these outlive a stage.
  const keep = await ownProcesses(engine, name);
  if (typeof keep === 'string') {
    await runEngine(engine, removeArgs(name));
    throw new StageError('init', `could not list the processes in ${spec.image}'s container (it needs sh and /proc): ${keep}`);
  }
  return runningContainer(spec, name, keep);
}

/** The started container's handle; `keep` are the processes killStrays leaves alone. */
function runningContainer(spec: SampleContainerSpec, name: string, keep: readonly string[]): SampleContainer {
  const { engine } = spec;
  const workdir = spec.trial.workdir;
  const fail = (what: string, r: EngineResult) => new StageError('post', `${engine} ${what} failed (exit ${r.code}): ${r.stderr.trim()}`);
  // A task's own commands keep the image's PATH and HOME; the harness gets the host's (its Node, its
  // private home, both mounted at their own paths).
  const inside = (env: Record<string, string>) => Object.keys(env).filter((k) => k !== 'PATH' && k !== 'HOME');
  const maxFileSizeBytes = spec.limits.maxFileSizeBytes;
  return {
    engine,
    name,
    workdir,
    shell(command, env, timeoutMs, user, args = []) {
      const spec = { name, workdir, envNames: inside(env), interactive: false, maxFileSizeBytes, ...(user !== undefined ? { user } : {}) };
      return runEngine(engine, execArgs(spec, ['bash', '-c', command, 'bash', ...args]), {
        env: clientEnv(env),
        timeoutMs,
      });
    },
    jail: (proxyPort, user) => containerJail(spec, name, proxyPort, user),
    async killStrays() {
      const r = await runEngine(engine, execArgs({ name, workdir: '/', envNames: [], interactive: false }, ['sh', '-c', killStraysScript(keep)]));
      if (r.code !== 0) throw fail('exec (ending what the agent left running)', r);
      return Number(r.stdout.trim()) || 0;
    },
    async copyIn(hostDir, dest) {
      const mk = await runEngine(engine, execArgs({ name, workdir, envNames: [], interactive: false }, ['mkdir', '-p', dest]));
      if (mk.code !== 0) throw fail(`exec mkdir ${dest}`, mk);
      const r = await runEngine(engine, copyInArgs(name, hostDir, dest));
      if (r.code !== 0) throw fail(`cp into ${dest}`, r);
    },
    async copyOut(src, hostDir) {
      await fs.promises.mkdir(hostDir, { recursive: true });
      const r = await runEngine(engine, copyOutArgs(name, src, hostDir));
      if (r.code !== 0) throw fail(`cp out of ${src}`, r);
    },
    async copyPathOut(src, hostPath) {
      const r = await runEngine(engine, ['cp', `${name}:${src}`, hostPath]);
      if (r.code === 0) return true;
      if (/no such file|could not find|not found/i.test(r.stderr)) return false;
      throw fail(`cp out of ${src}`, r);
    },
    async copyPathIn(hostPath, dest) {
      const r = await runEngine(engine, ['cp', hostPath, `${name}:${dest}`]);
      if (r.code !== 0) throw fail(`cp into ${dest}`, r);
    },
    async remove() {
      await runEngine(engine, removeArgs(name));
    },
  };
}

/** A Jail whose wrap runs the harness inside the container (behind the proxy bridge when `proxyPort` is given). */
function containerJail(spec: SampleContainerSpec, name: string, proxyPort: number | null, user: string | undefined): Jail {
  const { engine, limits } = spec;
  const workdir = spec.trial.workdir;
  return {
    home: null,
    wrap(cmd: HarnessCommand): HarnessCommand {
      const argv =
        proxyPort !== null ? bridged(fs.realpathSync(process.execPath), proxyPort, PROXY_SOCKET_INSIDE, false, cmd.file, cmd.args) : [cmd.file, ...cmd.args];
      return {
        file: engine,
        args: execArgs(
          {
            name,
            workdir,
            envNames: Object.keys(cmd.env),
            interactive: false,
            maxFileSizeBytes: limits.maxFileSizeBytes,
            ...(user !== undefined ? { user } : {}),
          },
          argv,
        ),
        env: clientEnv(cmd.env) as Record<string, string>,
      };
    },
    // The engine enforces the caps; an OOM kill or SIGXFSZ shows in the exit status.
    close: async (exit) =>
      exit?.exitCode === 137
        ? 'killed (exit 137: the memory limit, or the container was stopped)'
        : exit
          ? rlimitReason(exit.exitCode, exit.signal, limits)
          : null,
  };
}

/** The variables reach the engine's own environment and pass in by name: never on a command line. */
function clientEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  return { ...process.env, ...env };
}
