import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HarnessCommand } from '../../harness/types.js';
import { bridged } from '../../sandbox/bridge.js';
import { PROXY_SOCKET_INSIDE } from '../../sandbox/args.js';
import { type Jail, rlimitReason, type SandboxLimits } from '../../sandbox/index.js';
import { commandFailure, toolReason } from '../../core/process/failure.js';
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
import { DEFAULT_BUILD_TIMEOUT_SEC } from './toml-fields.js';
import { runHealthcheck } from './healthcheck.js';
import type { HarborHealthcheck, HarborTrial } from './types.js';

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
export function runEngine(
  engine: Engine,
  args: readonly string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number;
    /**
     * At the timeout, the client's descendants are killed and the client gets SIGTERM, then
     * SIGKILL only this long after: a `podman build` killed, or sent SIGTERM, leaves its RUN step
     * running (runc starts it in a session of its own, under the client's process tree).
     */
    termGraceMs?: number;
  } = {},
): Promise<EngineResult> {
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
    let grace: NodeJS.Timeout | undefined;
    const timer = opts.timeoutMs
      ? setTimeout(() => {
          timedOut = true;
          if (opts.termGraceMs === undefined) child.kill('SIGKILL');
          else {
            const tree = child.pid === undefined ? [] : descendants(child.pid);
            child.kill('SIGTERM');
            for (const pid of tree) {
              try {
                process.kill(pid, 'SIGKILL');
              } catch {
                // Gone already.
              }
            }
            grace = setTimeout(() => child.kill('SIGKILL'), opts.termGraceMs);
          }
        }, opts.timeoutMs)
      : undefined;
    child.on('close', () => clearTimeout(grace));
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

/** Every process below `root` (by /proc's parent links), deepest last; empty where /proc cannot be read. */
export function descendants(root: number): number[] {
  const parent = new Map<number, number[]>();
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  for (const e of entries) {
    try {
      // /proc/PID/stat: "pid (comm) state ppid …"; comm may hold spaces and parentheses.
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parent.set(ppid, [...(parent.get(ppid) ?? []), Number(e)]);
    } catch {
      // It ended while we read.
    }
  }
  const out: number[] = [];
  let next = [root];
  while (next.length > 0) {
    next = next.flatMap((p) => parent.get(p) ?? []);
    out.push(...next);
  }
  return out;
}

// One build attempt per image tag per process: the samples of a task wait on the same build, and a
// build that failed is that task's answer for every later sample too (trying it again per sample
// doubled the time a broken Dockerfile cost and printed its failure twice).
const builds = new Map<string, Promise<string>>();
const ONCE = 'polar tries each image once per process: start it again once the cause is fixed.';

/**
 * The task's image, built from environment/ once per content (tagged `polar-harbor/<task>:<hash>`;
 * `image inspect` finding it skips the build, so a later run, or another process, reuses it), under
 * task.toml's [environment].build_timeout_sec.
 */
export function ensureImage(engine: Engine, trial: HarborTrial, onNotice: (line: string) => void): Promise<string> {
  return ensureContextImage(engine, trial.name, path.join(trial.dir, 'environment'), onNotice, trial.buildTimeoutSec);
}

/**
 * An image built from a build context (its Dockerfile) once per content: the task's environment/,
 * or tests/ for Harbor's separate verifier (`polar-harbor/<task>-verifier:<hash>`). The build gets
 * `buildTimeoutSec` (Harbor's build_timeout_sec, default 600: config.py:325, applied to the
 * environment's start apart from the agent's timeout, trial/trial.py:925-929 and :990-999).
 */
export function ensureContextImage(
  engine: Engine,
  name: string,
  context: string,
  onNotice: (line: string) => void,
  buildTimeoutSec: number = DEFAULT_BUILD_TIMEOUT_SEC,
): Promise<string> {
  const tag = imageTag(name, contextHash(context));
  const key = `${engine}\0${tag}`;
  let build = builds.get(key);
  if (!build) {
    build = (async () => {
      if ((await runEngine(engine, inspectImageArgs(tag))).code === 0) return tag;
      onNotice(`building ${tag} from ${context} with ${engine} (build_timeout_sec ${buildTimeoutSec})`);
      const r = await runEngine(engine, buildArgs(tag, context), { timeoutMs: buildTimeoutSec * 1000, termGraceMs: 10_000 });
      const output = (r.stdout + r.stderr).trim();
      if (r.timedOut)
        throw new StageError(
          'init',
          `${engine} build of ${context} did not finish within build_timeout_sec = ${buildTimeoutSec} s (task.toml [environment]): raise it there, or build the image once beforehand with \`${engine} build -t ${tag} ${context}\` (polar reuses an image with that tag). ${ONCE}\n${output}`,
        );
      if (r.code !== 0) {
        // The engine says why last (a base image it cannot pull, a failing RUN): that goes first.
        const cause =
          output
            .split('\n')
            .filter((l) => l.trim())
            .pop() ?? '';
        throw new StageError(
          'init',
          `${engine} build of ${context} failed (exit ${r.code}): ${cause} (--environment host runs the task in polar's sandbox without its image). ${ONCE}\n${output}`,
        );
      }
      return tag;
    })();
    // Every sample awaits it; this only keeps a failure no sample is waiting on yet from counting as unhandled.
    build.catch(() => {});
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

/**
 * Makes the workspace folder as root (the image may lack it: a WORKDIR no later step fills is not
 * in podman 4.3's image, and an image without one gets polar's /app), then returns the pids besides
 * init in the container that has just started (its keep-alive), or why not.
 */
async function ownProcesses(engine: Engine, name: string, workdir: string): Promise<string[] | string> {
  const script = `mkdir -p -- "$1" || { echo "could not make the workspace folder $1 as root" >&2; exit 1; }; ${LIST_OTHERS}`;
  for (let i = 0; i < 50; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 100));
    const r = await runEngine(engine, execArgs({ name, workdir: '/', envNames: [], interactive: false, user: '0' }, ['sh', '-c', script, 'sh', workdir]));
    if (r.code !== 0) return r.stderr.trim() || `exit ${r.code}`;
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
  /** task.toml's [environment.healthcheck]: run until it passes before the container is handed over. */
  healthcheck?: HarborHealthcheck;
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
  /**
   * The container's process count and cap, read by the engine from its cgroup (no process started
   * inside: a container at its cap starts none); null where the engine cannot say.
   */
  processes(): Promise<{ current: number; cap: number } | null>;
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
  const args = runArgs({
    name,
    image: spec.image,
    network: spec.internet ? 'default' : 'none',
    mounts,
    limits: spec.limits,
    cpus: spec.cpus,
  });
  const started = await runEngine(engine, args);
  if (started.code !== 0) {
    await runEngine(engine, removeArgs(name));
    throw new StageError('init', cannotStart(engine, spec.image, args, toolReason(started.stderr)));
  }
  const unhealthy = spec.healthcheck ? await healthcheckFails(engine, name, spec.healthcheck) : null;
  if (unhealthy) {
    await runEngine(engine, removeArgs(name));
    throw new StageError('init', unhealthy);
  }
  // The container's own processes, read before anything of the task's runs (after its healthcheck
  // passed, so the services it waited for are among them): its init (1), the image's ENTRYPOINT and
  // what it started, and the keep-alive (`sleep infinity`). Only these outlive a stage.
  const keep = await ownProcesses(engine, name, spec.trial.workdir);
  if (typeof keep === 'string') {
    await runEngine(engine, removeArgs(name));
    throw new StageError(
      'init',
      `${spec.image}'s container started but polar could not prepare it: ${keep}. polar needs sh and /proc in the image and makes the workspace folder ${spec.trial.workdir} as root: check with \`${engine} run --rm --user 0 ${spec.image} sh -c 'mkdir -p ${spec.trial.workdir} && ls /proc'\`, or pass --environment host`,
    );
  }
  return runningContainer(spec, name, keep);
}

/**
 * Why a container did not start, and what to try: the engine's own message first, then the command
 * polar ran (its flags are polar's: caps, mounts, network), then a plain start of the same image, which
 * tells an image or engine that cannot start anything from a flag of polar's this engine refuses.
 */
export function cannotStart(engine: Engine, image: string, args: readonly string[], reason: string): string {
  return [
    `${engine} could not start the sample's container from ${image}: ${reason || '(no message)'}.`,
    `polar ran: ${engine} ${args.join(' ')}.`,
    `Try \`${engine} run --rm ${image} true\`: if that fails too, the image or ${engine} itself cannot start containers here (fix that, or pass --environment host);`,
    `if it works, one of polar's flags above is what ${engine} refuses (--max-memory 0 and --max-procs 0 drop polar's caps; the mounts are polar's runtime and --sandbox-ro paths).`,
  ].join(' ');
}

/**
 * Harbor's healthcheck (environments/base.py:1154-1206) in the started container, as the image's
 * user, before anything of the task's runs: null once it passes, else why not (the sample ends in
 * error at INIT, as Harbor's trial ends without a reward, trial.py:321-326).
 */
async function healthcheckFails(engine: Engine, name: string, hc: HarborHealthcheck): Promise<string | null> {
  const failed = await runHealthcheck(hc, async (timeoutMs) => {
    const r = await runEngine(engine, execArgs({ name, workdir: '/', envNames: [], interactive: false }, ['sh', '-c', hc.command]), { timeoutMs });
    if (r.code === 0) return { ok: true };
    return { ok: false, why: r.timedOut ? `timed out after ${hc.timeoutSec} s` : `exit ${r.code}${r.stderr.trim() ? `: ${r.stderr.trim().slice(-200)}` : ''}` };
  });
  return (
    failed &&
    `${failed} (task.toml [environment.healthcheck]: the image must start what it checks, from its ENTRYPOINT; \`${engine} run\` the task's image to see why it does not come up)`
  );
}

/** The started container's handle; `keep` are the processes killStrays leaves alone. */
function runningContainer(spec: SampleContainerSpec, name: string, keep: readonly string[]): SampleContainer {
  const { engine } = spec;
  const workdir = spec.trial.workdir;
  const fail = (what: string, r: EngineResult) => new StageError('post', commandFailure(`${engine} ${what}`, { ...r, exitCode: r.code }));
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
    async processes() {
      const [stats, cap] = await Promise.all([
        runEngine(engine, ['stats', '--no-stream', '--format', '{{.PIDs}}', name]),
        runEngine(engine, ['inspect', '--format', '{{.HostConfig.PidsLimit}}', name]),
      ]);
      const current = Number(stats.stdout.trim());
      const limit = Number(cap.stdout.trim());
      return stats.code === 0 && cap.code === 0 && Number.isInteger(current) && Number.isInteger(limit) ? { current, cap: limit } : null;
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
