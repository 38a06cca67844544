import fs from 'node:fs/promises';
import path from 'node:path';
import { runShell, shellQuote } from '../../core/process/shell.js';
import type { HarnessCommand } from '../../harness/types.js';
import { baseEnvironment } from '../../harness/env.js';
import { fixedPlacement, openJail, type Bind } from '../../sandbox/index.js';
import { StageError } from '../stage-error.js';
import { agentMounts, logsDir } from '../harbor/trial.js';
import { evaluatorSandbox, setupSandbox } from '../sandboxing.js';
import { applyDiff, captureDiff, keepBaseline, prepareWorkspace, removeWorkspace, type PreparedWorkspace } from '../workspace.js';
import { carriedPaths } from '../harbor/verifier-config.js';
import { hostArtifacts } from './artifacts.js';
import { hostRefusal } from '../harbor/features.js';
import type { EnvironmentDeps, SampleSpec } from './deps.js';
import type { SampleEnvironment, VerifierCommand, VerifierRun } from './types.js';

/**
 * The host environment: every command of the sample in its own bubblewrap sandbox (or none with
 * `--sandbox none`, JSONL tasks only) over the host's read-only system folders, so no command of
 * the agent can change what a later one runs. Each command's processes are dead when it returns
 * (its cgroup, and bwrap's PID namespace, whose init takes them all with it).
 */
export function hostEnvironment(deps: EnvironmentDeps, spec: SampleSpec): SampleEnvironment {
  const { task, dir } = spec;
  const boxed = deps.sandbox.kind !== 'none';
  const trial = task.harbor;
  // The workspace as every sandboxed command sees it: a Harbor task's WORKDIR, else the fixed path.
  const inside = trial ? trial.workdir : (deps.inside?.workspace ?? null);
  const gitSandbox = boxed ? evaluatorSandbox(deps.sandbox, null, deps.inside) : undefined;
  const setup = boxed ? setupSandbox(deps.sandbox, task, deps.inside) : undefined;
  let workspace: PreparedWorkspace | null = null;
  // Every command's private home at the fixed path too: no host path (a temp folder's name) inside;
  // polar's install at its fixed path, and the fixed time zone.
  const home = deps.inside ? fixedPlacement(deps.inside) : {};
  // Harbor's separate verifier on the host: a fresh WORKDIR and /logs holding only the artifacts.
  const separate = trial?.verifierMode === 'separate' ? trial.separateVerifier : undefined;
  const carried = { workspace: `${dir}-verify`, logs: `${dir}-verify-logs` };

  async function run(cmd: VerifierCommand): Promise<VerifierRun> {
    if (!boxed && cmd.rewardDir && trial)
      throw new StageError('post', "a Harbor task's verifier needs the sandbox for its paths (/app, /tests, /logs); this process runs with --sandbox none");
    const rewardDir = cmd.rewardDir ? await fs.mkdtemp(path.join(await scratch(deps), 'verifier-')) : null;
    // A separate verifier sees the carried artifacts in place of the agent's WORKDIR and /logs.
    const apart = separate && cmd.rewardDir;
    const cwd = apart ? carried.workspace : cmd.workspace;
    const binds: Bind[] = [
      // Harbor's /logs: the agent's logs as it left them, and a /logs/verifier polar made empty.
      ...(cmd.rewardDir && trial ? [{ source: apart ? carried.logs : logsDir(cmd.workspace), dest: '/logs', readOnly: false }] : []),
      ...(rewardDir ? [{ source: rewardDir, dest: '/logs/verifier', readOnly: false }] : []),
      ...cmd.readOnly.map((m) => ({ source: m.source, dest: m.dest, readOnly: true })),
    ];
    const at = apart ? (separate.workdir ?? inside) : inside;
    const jail = await openJail(deps.sandbox, { cwd, network: cmd.network, ...(at ? { cwdInside: at } : {}), ...home, binds }).catch(async (err: Error) => {
      if (rewardDir) await fs.rm(rewardDir, { recursive: true, force: true });
      throw new StageError('post', `${cmd.what}: the sandbox would not open: ${err.message}`, { cause: err });
    });
    // A JSONL task's test runner writes its report there (evaluators/named-tests/): /logs/verifier
    // in the sandbox, the folder itself without one.
    const env = rewardDir && !trial ? { ...cmd.env, POLAR_REPORT_DIR: boxed ? '/logs/verifier' : rewardDir } : cmd.env;
    const r = await runShell(boxed ? killWhenDone(cmd.command) : cmd.command, {
      cwd,
      env,
      timeoutMs: cmd.timeoutMs,
      wrap: (c: HarnessCommand) => jail.wrap(c),
    });
    // Closing the jail ends everything the command started before a reward file is read.
    const limit = await jail.close({ exitCode: r.exitCode, signal: r.signal });
    return {
      exitCode: r.exitCode,
      signal: r.signal,
      timedOut: r.timedOut,
      failedToStart: r.failedToStart ?? null,
      limit,
      stdout: r.stdout,
      stderr: r.stderr,
      rewardDir,
    };
  }

  return {
    kind: 'host',
    async prepare(deadline) {
      // A task that needs its image's processes (a service, a healthcheck) is refused here, by name, with the way out.
      const refused = trial ? hostRefusal(trial) : null;
      if (refused) throw new StageError('init', refused);
      // The agent's diff is taken with polar's own copy of the baseline repository, never the .git the agent had.
      workspace = await keepBaseline(await prepareWorkspace(task, dir, deadline, baseEnvironment(), setup, gitSandbox));
      return workspace;
    },
    harnessPlacement() {
      const fixed = deps.inside;
      return {
        ...(fixed ? { cwdInside: fixed.workspace, ...fixedPlacement(fixed) } : {}),
        ...(trial ? agentMounts(trial, dir) : {}),
      };
    },
    async runAgentCommand(command, opts) {
      if (!boxed)
        throw new StageError('run', "a built-in agent needs the sandbox for the task's paths (/app, /solution, /logs); this process runs with --sandbox none");
      const jail = await openJail(deps.sandbox, {
        cwd: dir,
        network: opts.network,
        ...(inside ? { cwdInside: inside } : {}),
        ...home,
        binds: [...(trial ? agentMounts(trial, dir).binds : []), ...opts.readOnly.map((m) => ({ ...m, readOnly: true }))],
      });
      const r = await runShell(command, { cwd: dir, env: opts.env, timeoutMs: opts.timeoutMs, wrap: (c: HarnessCommand) => jail.wrap(c) });
      const limit = await jail.close({ exitCode: r.exitCode, signal: r.signal });
      if (r.failedToStart) throw new StageError('run', `the agent's command could not start: ${r.failedToStart}`);
      return { status: r.timedOut ? 'timeout' : r.exitCode === 0 ? 'completed' : 'failed', exitCode: r.exitCode, limit };
    },
    // Every command of the agent ran in a jail that was closed when it ended: nothing of it runs,
    // and the next step starts from the same workspace folder.
    checkpoint: () => captureDiff(prepared(workspace), baseEnvironment(), gitSandbox),
    // The workspace folder is what every sandbox of the sample mounts: the files go there, never through a link in it.
    addWorkspaceFiles: (hostDir) => addFilesTo(prepared(workspace).dir, hostDir),
    // No service of the task's image runs here (a task with a healthcheck is refused at prepare).
    healthcheck: async () => (trial ? hostRefusal(trial) : null) ?? 'the host environment runs no healthcheck: --environment podman',
    async collect() {
      // Every command of the agent ran in a jail that was closed when it ended: nothing of it runs.
      const diff = await captureDiff(prepared(workspace), baseEnvironment(), gitSandbox);
      if (separate && trial) {
        const lost = await hostArtifacts(carriedPaths(trial), { workdir: trial.workdir, workspace: dir, logs: logsDir(dir) }, carried);
        if (lost.length > 0)
          deps.onNotice(
            `notice: task ${task.id}: the host environment keeps no files outside ${trial.workdir} and /logs after the agent, so these artifacts do not reach its verifier: ${lost.join(', ')}`,
          );
      }
      return diff;
    },
    verification: {
      environment: 'host',
      place: !boxed ? 'the host (no sandbox)' : separate ? "a fresh host sandbox holding only the task's artifacts" : 'a fresh host sandbox',
      workspaceInside: (hostDir) => (boxed && inside ? inside : hostDir),
      run,
      freshWorkspace: (dest, deadline, env) => prepareWorkspace(task, dest, deadline, env, setup, gitSandbox),
      applyDiff: (ws, diff, env) => applyDiff(ws, diff, env, gitSandbox),
    },
    async dispose(keep) {
      await fs.rm(carried.workspace, { recursive: true, force: true });
      await fs.rm(carried.logs, { recursive: true, force: true });
      if (!keep) await removeWorkspace(dir);
    },
  };
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
 * the command's end and this kill, as in a container (container.ts, STOP_WHEN_DONE). Only inside
 * the sandbox: with `--sandbox none`, kill(-1) would reach every process of the user.
 */
function killWhenDone(command: string): string {
  return `bash -c ${shellQuote(command)}; rc=$?; kill -KILL -1 2>/dev/null; exit $rc`;
}
