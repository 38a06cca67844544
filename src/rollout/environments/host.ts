import fs from 'node:fs/promises';
import path from 'node:path';
import { runShell, shellQuote } from '../../core/process/shell.js';
import type { HarnessCommand } from '../../harness/types.js';
import { baseEnvironment } from '../../harness/env.js';
import { fixedPlacement, openJail, type Bind } from '../../sandbox/index.js';
import { StageError } from '../stage-error.js';
import { agentMounts, logsDir } from '../harbor/trial.js';
import { evaluatorSandbox, setupSandbox } from '../sandboxing.js';
import { applyDiff, captureDiff, keepBaseline, type OpenSandbox, prepareWorkspace, removeWorkspace, type PreparedWorkspace } from '../workspace.js';
import { carriedPaths } from '../harbor/verifier-config.js';
import { hostArtifacts } from './artifacts.js';
import { hostRefusal } from '../harbor/features.js';
import type { EnvironmentDeps, SampleSpec } from './deps.js';
import type { HarborTrial, SeparateVerifier } from '../harbor/types.js';
import type { AgentCommandEnd, AgentCommandOptions, HarnessPlacement, SampleEnvironment, VerifierCommand, VerifierRun } from './types.js';

/**
 * The host environment: every command of the sample in its own bubblewrap sandbox (or none with
 * `--sandbox none`, JSONL tasks only) over the host's read-only system folders, so no command of
 * the agent can change what a later one runs. Each command's processes are dead when it returns
 * (its cgroup, and bwrap's PID namespace, whose init takes them all with it).
 */
export function hostEnvironment(deps: EnvironmentDeps, spec: SampleSpec): SampleEnvironment {
  const h = newHostSample(deps, spec);
  return {
    kind: 'host',
    prepare: (deadline) => prepare(h, deadline),
    harnessPlacement: () => placement(h),
    runAgentCommand: (command, opts) => agentCommand(h, command, opts),
    // Every command of the agent ran in a jail that was closed when it ended: nothing of it runs,
    // and the next step starts from the same workspace folder.
    checkpoint: () => captureDiff(prepared(h.workspace), baseEnvironment(), h.gitSandbox),
    // The workspace folder is what every sandbox of the sample mounts: the files go there, never through a link in it.
    addWorkspaceFiles: (hostDir) => addFilesTo(prepared(h.workspace).dir, hostDir),
    // No service of the task's image runs here (a task with a healthcheck is refused at prepare).
    healthcheck: async () => (h.trial ? hostRefusal(h.trial) : null) ?? 'the host environment runs no healthcheck: --environment podman',
    collect: () => collect(h),
    verification: {
      environment: 'host',
      place: !h.boxed ? 'the host (no sandbox)' : h.separate ? "a fresh host sandbox holding only the task's artifacts" : 'a fresh host sandbox',
      workspaceInside: (hostDir) => (h.boxed && h.inside ? h.inside : hostDir),
      run: (cmd) => runVerifier(h, cmd),
      freshWorkspace: (dest, deadline, env) => prepareWorkspace(spec.task, dest, deadline, env, h.setup, h.gitSandbox),
      applyDiff: (ws, diff, env) => applyDiff(ws, diff, env, h.gitSandbox),
    },
    dispose: (keep) => dispose(h, keep),
  };
}

/** One sample on the host: what its steps share. */
interface HostSample {
  deps: EnvironmentDeps;
  spec: SampleSpec;
  boxed: boolean;
  trial: HarborTrial | undefined;
  /** The workspace as every sandboxed command sees it: a Harbor task's WORKDIR, else the fixed path. */
  inside: string | null;
  gitSandbox: OpenSandbox | undefined;
  setup: OpenSandbox | undefined;
  /** Every command's private home at the fixed path too (no host path inside), polar's install, the fixed time zone. */
  home: ReturnType<typeof fixedPlacement> | Record<string, never>;
  /** Harbor's separate verifier on the host: a fresh WORKDIR and /logs holding only the artifacts. */
  separate: SeparateVerifier | undefined;
  carried: { workspace: string; logs: string };
  workspace: PreparedWorkspace | null;
}

function newHostSample(deps: EnvironmentDeps, spec: SampleSpec): HostSample {
  const boxed = deps.sandbox.kind !== 'none';
  const trial = spec.task.harbor;
  return {
    deps,
    spec,
    boxed,
    trial,
    inside: trial ? trial.workdir : (deps.inside?.workspace ?? null),
    gitSandbox: boxed ? evaluatorSandbox(deps.sandbox, null, deps.inside) : undefined,
    setup: boxed ? setupSandbox(deps.sandbox, spec.task, deps.inside) : undefined,
    home: deps.inside ? fixedPlacement(deps.inside) : {},
    separate: trial?.verifierMode === 'separate' ? trial.separateVerifier : undefined,
    carried: { workspace: `${spec.dir}-verify`, logs: `${spec.dir}-verify-logs` },
    workspace: null,
  };
}

/** INIT: the task's starting state; a task that needs its image's processes is refused, by name, with the way out. */
async function prepare(h: HostSample, deadline: number): Promise<PreparedWorkspace> {
  const refused = h.trial ? hostRefusal(h.trial) : null;
  if (refused) throw new StageError('init', refused);
  // The agent's diff is taken with polar's own copy of the baseline repository, never the .git the agent had.
  h.workspace = await keepBaseline(await prepareWorkspace(h.spec.task, h.spec.dir, deadline, baseEnvironment(), h.setup, h.gitSandbox));
  return h.workspace;
}

function placement(h: HostSample): HarnessPlacement {
  const fixed = h.deps.inside;
  return {
    ...(fixed ? { cwdInside: fixed.workspace, ...fixedPlacement(fixed) } : {}),
    ...(h.trial ? agentMounts(h.trial, h.spec.dir) : {}),
  };
}

/** RUNNING without a model: one shell command in a sandbox of its own, the task's paths bound. */
async function agentCommand(h: HostSample, command: string, opts: AgentCommandOptions): Promise<AgentCommandEnd> {
  if (!h.boxed)
    throw new StageError('run', "a built-in agent needs the sandbox for the task's paths (/app, /solution, /logs); this process runs with --sandbox none");
  const { dir } = h.spec;
  const jail = await openJail(h.deps.sandbox, {
    cwd: dir,
    network: opts.network,
    ...(h.inside ? { cwdInside: h.inside } : {}),
    ...h.home,
    binds: [...(h.trial ? agentMounts(h.trial, dir).binds : []), ...opts.readOnly.map((m) => ({ ...m, readOnly: true }))],
  });
  const r = await runShell(command, { cwd: dir, env: opts.env, timeoutMs: opts.timeoutMs, wrap: (c: HarnessCommand) => jail.wrap(c) });
  const limit = await jail.close({ exitCode: r.exitCode, signal: r.signal });
  if (r.failedToStart) throw new StageError('run', `the agent's command could not start: ${r.failedToStart}`);
  return { status: r.timedOut ? 'timeout' : r.exitCode === 0 ? 'completed' : 'failed', exitCode: r.exitCode, limit };
}

/** After the agent: its diff; a separate verifier's artifacts carried (those outside WORKDIR and /logs are lost here, said). */
async function collect(h: HostSample): Promise<string> {
  const { trial, spec, deps } = h;
  // Every command of the agent ran in a jail that was closed when it ended: nothing of it runs.
  const diff = await captureDiff(prepared(h.workspace), baseEnvironment(), h.gitSandbox);
  if (!h.separate || !trial) return diff;
  const lost = await hostArtifacts(carriedPaths(trial), { workdir: trial.workdir, workspace: spec.dir, logs: logsDir(spec.dir) }, h.carried);
  if (lost.length > 0)
    deps.onNotice(
      `notice: task ${spec.task.id}: the host environment keeps no files outside ${trial.workdir} and /logs after the agent, so these artifacts do not reach its verifier: ${lost.join(', ')}`,
    );
  return diff;
}

/** One verifier command in a fresh sandbox; everything it started is dead before its reward files are read. */
async function runVerifier(h: HostSample, cmd: VerifierCommand): Promise<VerifierRun> {
  const { trial, boxed, deps } = h;
  if (!boxed && cmd.rewardDir && trial)
    throw new StageError('post', "a Harbor task's verifier needs the sandbox for its paths (/app, /tests, /logs); this process runs with --sandbox none");
  const rewardDir = cmd.rewardDir ? await fs.mkdtemp(path.join(await scratch(deps), 'verifier-')) : null;
  // A separate verifier sees the carried artifacts in place of the agent's WORKDIR and /logs.
  const apart = h.separate !== undefined && cmd.rewardDir;
  const cwd = apart ? h.carried.workspace : cmd.workspace;
  const at = apart ? (h.separate?.workdir ?? h.inside) : h.inside;
  const binds = verifierBinds(h, cmd, rewardDir, apart);
  const jail = await openJail(deps.sandbox, { cwd, network: cmd.network, ...(at ? { cwdInside: at } : {}), ...h.home, binds }).catch(async (err: Error) => {
    if (rewardDir) await fs.rm(rewardDir, { recursive: true, force: true });
    throw new StageError('post', `${cmd.what}: the sandbox would not open: ${err.message}`, { cause: err });
  });
  // A JSONL task's test runner writes its report there (evaluators/named-tests/): /logs/verifier
  // in the sandbox, the folder itself without one.
  const env = rewardDir && !trial ? { ...cmd.env, POLAR_REPORT_DIR: boxed ? '/logs/verifier' : rewardDir } : cmd.env;
  const r = await runShell(boxed ? killWhenDone(cmd.command) : cmd.command, { cwd, env, timeoutMs: cmd.timeoutMs, wrap: (c: HarnessCommand) => jail.wrap(c) });
  // Closing the jail ends everything the command started before a reward file is read.
  const limit = await jail.close({ exitCode: r.exitCode, signal: r.signal });
  const { exitCode, signal, timedOut, stdout, stderr } = r;
  return { exitCode, signal, timedOut, failedToStart: r.failedToStart ?? null, limit, stdout, stderr, rewardDir };
}

/** Harbor's /logs (the agent's logs as it left them, or the carried ones), a /logs/verifier polar made empty, the read-only folders. */
function verifierBinds(h: HostSample, cmd: VerifierCommand, rewardDir: string | null, apart: boolean): Bind[] {
  return [
    ...(cmd.rewardDir && h.trial ? [{ source: apart ? h.carried.logs : logsDir(cmd.workspace), dest: '/logs', readOnly: false }] : []),
    ...(rewardDir ? [{ source: rewardDir, dest: '/logs/verifier', readOnly: false }] : []),
    ...cmd.readOnly.map((m) => ({ source: m.source, dest: m.dest, readOnly: true })),
  ];
}

async function dispose(h: HostSample, keep: boolean): Promise<void> {
  await fs.rm(h.carried.workspace, { recursive: true, force: true });
  await fs.rm(h.carried.logs, { recursive: true, force: true });
  if (!keep) await removeWorkspace(h.spec.dir);
}

/**
 * A host folder's contents copied into the workspace, entry by entry. The workspace is the agent's:
 * a link it planted where a file or folder goes is replaced, never written through (it could lead
 * to any host folder polar may write).
 */
async function addFilesTo(dest: string, hostDir: string): Promise<void> {
  for (const e of await fs.readdir(hostDir, { withFileTypes: true })) {
    const from = path.join(hostDir, e.name);
    const to = path.join(dest, e.name);
    const there = await fs.lstat(to).catch(() => null);
    if (e.isDirectory()) {
      if (there && !there.isDirectory()) await fs.rm(to, { recursive: true, force: true });
      if (!there?.isDirectory()) await fs.mkdir(to);
      await addFilesTo(to, from);
      continue;
    }
    if (there) await fs.rm(to, { recursive: true, force: true });
    if (e.isSymbolicLink()) await fs.symlink(await fs.readlink(from), to);
    else if (e.isFile()) {
      await fs.copyFile(from, to, fs.constants.COPYFILE_EXCL);
      await fs.chmod(to, (await fs.stat(from)).mode & 0o777);
    }
  }
}

function prepared(ws: PreparedWorkspace | null): PreparedWorkspace {
  if (!ws) throw new StageError('post', 'the workspace was never prepared');
  return ws;
}

async function scratch(deps: EnvironmentDeps): Promise<string> {
  await fs.mkdir(deps.scratch, { recursive: true, mode: 0o700 });
  return deps.scratch;
}

/**
 * The verifier's command, then at once, in the same shell, every other process of the sandbox's
 * PID namespace killed (one kill(-1), which spares only bwrap's init and the caller), its exit
 * status kept. Without it, what test.sh left running lived until bwrap's init saw the command end
 * and the namespace went: on a loaded machine, long enough for a loop that waits for test.sh to
 * end to rewrite reward.txt (red-team.test.ts, verify-daemon). What is left is the instant between
 * the command's end and this kill, as in a container (box/verify.ts, STOP_WHEN_DONE). Only inside
 * the sandbox: with `--sandbox none`, kill(-1) would reach every process of the user.
 */
function killWhenDone(command: string): string {
  return `bash -c ${shellQuote(command)}; rc=$?; kill -KILL -1 2>/dev/null; exit $rc`;
}
