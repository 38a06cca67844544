import fs from 'node:fs';
import type { HarnessCommand } from '../../harness/types.js';
import { commandFailure } from '../../core/process/failure.js';
import { bridged } from '../../sandbox/bridge.js';
import { PROXY_SOCKET_INSIDE } from '../../sandbox/args.js';
import { type Jail, rlimitReason } from '../../sandbox/index.js';
import { StageError } from '../stage-error.js';
import { copyInArgs, copyOutArgs, type Engine, execArgs, type ExecSpec, removeArgs } from './engine-args.js';
import { type EngineResult, runEngine } from './engine-run.js';
import { runHealthcheck } from './healthcheck.js';
import type { Box, BoxSpec, Healthcheck, HarnessHost, ProcessCount } from './types.js';

/** A started container as a Box, with both optional powers an engine has: hosting the harness, counting processes. */
export type EngineBox = Box & HarnessHost & ProcessCount;

/**
 * A container just started from `spec`: its healthcheck until it passes, its workspace folder made
 * as root, its own processes noted (init, the keep-alive, the image's services). Removed again when
 * any of that fails.
 */
export async function openEngineBox(engine: Engine, spec: BoxSpec, name: string): Promise<EngineBox> {
  const fail = async (why: string): Promise<never> => {
    await runEngine(engine, removeArgs(name));
    throw new StageError('init', why);
  };
  const unhealthy = spec.healthcheck ? await healthcheckFails(engine, name, spec.healthcheck) : null;
  if (unhealthy) return fail(unhealthy);
  // The container's own processes, read before anything of the task's runs (after its healthcheck
  // passed, so the services it waited for are among them): its init (1), the image's ENTRYPOINT and
  // what it started, and the keep-alive (`sleep infinity`). Only these outlive a stage.
  const keep = await ownProcesses(engine, name, spec.workdir);
  if (typeof keep === 'string')
    return fail(
      `${spec.image}'s container started but polar could not prepare it: ${keep}. polar needs sh and /proc in the image and makes the workspace folder ${spec.workdir} as root: check with \`${engine} run --rm --user 0 ${spec.image} sh -c 'mkdir -p ${spec.workdir} && ls /proc'\`, or pass --environment host`,
    );
  return engineBox(engine, spec, name, keep);
}

/**
 * A healthcheck (Harbor's environments/base.py:1154-1206; a compose service's) in the started
 * container, as the image's user: null once it passes, else why not (Harbor's trial ends without a
 * reward, trial.py:321-326).
 */
async function healthcheckFails(engine: Engine, name: string, hc: Healthcheck): Promise<string | null> {
  const failed = await runHealthcheck(hc, async (timeoutMs) => {
    const r = await runEngine(engine, execArgs({ name, workdir: '/', envNames: [], interactive: false }, ['sh', '-c', hc.command]), { timeoutMs });
    if (r.code === 0) return { ok: true };
    return { ok: false, why: r.timedOut ? `timed out after ${hc.timeoutSec} s` : `exit ${r.code}${r.stderr.trim() ? `: ${r.stderr.trim().slice(-200)}` : ''}` };
  });
  return (
    failed &&
    `${failed} (a healthcheck: the image must start what it checks, from its ENTRYPOINT or command; \`${engine} run\` the image to see why it does not come up)`
  );
}

/** Prints every pid in the container but 1 and its own. */
const LIST_OTHERS = 'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" != 1 ] && [ "$p" != "$$" ] && echo "$p"; done; true';

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

/** The started container's handle; `keep` are the processes killStrays leaves alone. */
function engineBox(engine: Engine, spec: BoxSpec, name: string, keep: readonly string[]): EngineBox {
  const { workdir } = spec;
  const fail = (what: string, r: EngineResult) => new StageError('post', commandFailure(`${engine} ${what}`, { ...r, exitCode: r.code }));
  const maxFileSizeBytes = spec.limits.maxFileSizeBytes;
  const exec = (argv: readonly string[], extra: Partial<ExecSpec> = {}) => execArgs({ name, workdir, envNames: [], interactive: false, ...extra }, argv);
  return {
    name,
    workdir,
    shell(command, env, timeoutMs, user, args = []) {
      // A task's own commands keep the image's PATH and HOME; the harness gets the host's (its Node,
      // its private home, both mounted at their own paths).
      const envNames = Object.keys(env).filter((k) => k !== 'PATH' && k !== 'HOME');
      const argv = exec(['bash', '-c', command, 'bash', ...args], { envNames, maxFileSizeBytes, ...(user !== undefined ? { user } : {}) });
      return runEngine(engine, argv, { env: clientEnv(env), timeoutMs });
    },
    sh: (script, args = [], timeoutMs = 60_000) => runEngine(engine, exec(['sh', '-c', script, 'sh', ...args], { workdir: '/', user: '0' }), { timeoutMs }),
    jail: (proxyPort, user) => engineJail(engine, spec, name, proxyPort, user),
    async killStrays() {
      const r = await runEngine(engine, exec(['sh', '-c', killStraysScript(keep)], { workdir: '/' }));
      if (r.code !== 0) throw fail('exec (ending what the agent left running)', r);
      return Number(r.stdout.trim()) || 0;
    },
    processes: () => processCount(engine, name),
    async copyIn(hostDir, dest) {
      const mk = await runEngine(engine, exec(['mkdir', '-p', dest]));
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

/** The container's process count and cap, read by the engine from its cgroup (nothing started inside). */
async function processCount(engine: Engine, name: string): Promise<{ current: number; cap: number } | null> {
  const [stats, cap] = await Promise.all([
    runEngine(engine, ['stats', '--no-stream', '--format', '{{.PIDs}}', name]),
    runEngine(engine, ['inspect', '--format', '{{.HostConfig.PidsLimit}}', name]),
  ]);
  const current = Number(stats.stdout.trim());
  const limit = Number(cap.stdout.trim());
  return stats.code === 0 && cap.code === 0 && Number.isInteger(current) && Number.isInteger(limit) ? { current, cap: limit } : null;
}

/** A Jail whose wrap runs the harness inside the container (behind the proxy bridge when `proxyPort` is given). */
function engineJail(engine: Engine, spec: BoxSpec, name: string, proxyPort: number | null, user: string | undefined): Jail {
  const { limits, workdir } = spec;
  return {
    home: null,
    wrap(cmd: HarnessCommand): HarnessCommand {
      const argv =
        proxyPort !== null ? bridged(fs.realpathSync(process.execPath), proxyPort, PROXY_SOCKET_INSIDE, false, cmd.file, cmd.args) : [cmd.file, ...cmd.args];
      const exec: ExecSpec = {
        name,
        workdir,
        envNames: Object.keys(cmd.env),
        interactive: false,
        maxFileSizeBytes: limits.maxFileSizeBytes,
        ...(user !== undefined ? { user } : {}),
      };
      return { file: engine, args: execArgs(exec, argv), env: clientEnv(cmd.env) as Record<string, string> };
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
