import fs from 'node:fs/promises';
import path from 'node:path';
import { baseEnvironment } from '../../harness/env.js';
import { Forfeit, StageError } from '../stage-error.js';
import type { Engine } from '../harbor/container-args.js';
import { ensureContextImage, ensureImage, imageWorkdir, nodePrefix, type SampleContainer, startSampleContainer } from '../harbor/container.js';
import { runHealthcheck } from '../harbor/healthcheck.js';
import { carriedPaths } from '../harbor/verifier-config.js';
import { carryArtifactsIn, copyArtifactsOut } from './artifacts.js';
import { copyWorkdirOut, containerStartingState, openTaskContainer, withTaskMemory } from '../harbor/container-trial.js';
import { agentMounts, logsDir } from '../harbor/trial.js';
import { evaluatorSandbox, setupSandbox } from '../sandboxing.js';
import { applyDiff, captureDiff, keepBaseline, prepareWorkspace, removeWorkspace, type PreparedWorkspace } from '../workspace.js';
import type { EnvironmentDeps, SampleSpec } from './deps.js';
import type { SampleEnvironment, VerifierCommand, VerifierRun } from './types.js';

/**
 * A Harbor task in its own image, through a container engine (`--environment docker|podman`). The
 * agent works in the sample's container; after it, the task's collect hooks run, everything left
 * running there is killed, its WORKDIR and /logs/agent (and a separate verifier's artifacts) are
 * copied out, and the container is removed. The verifier then runs in a container the agent never
 * had: Harbor's separate verifier image where the task asks for one (`[verifier] environment_mode =
 * "separate"`: only the artifacts cross), else a fresh container of the task's image with the
 * agent's WORKDIR and /logs/agent carried in. That is polar's default where Harbor's is the agent's
 * own container: there the agent (often root) could replace what test.sh runs (/usr/bin/bash, the
 * Python it imports) or leave a process that rewrites the reward. In a fresh container whatever it
 * did to the system is gone; only its files in WORKDIR reach the verifier, which is what a task
 * grades. A task that grades state outside WORKDIR (an installed package, a service's config)
 * names it as an artifact in separate mode.
 */
export function containerEnvironment(engine: Engine) {
  return (deps: EnvironmentDeps, spec: SampleSpec): SampleEnvironment => {
    const { task, dir, sampleId, sessionId } = spec;
    const trial = task.harbor;
    if (!trial) throw new StageError('init', `--environment ${engine} runs Harbor task folders; task ${task.id} is a JSONL task (use --environment host)`);
    const boxed = deps.sandbox.kind !== 'none';
    const gitSandbox = boxed ? evaluatorSandbox(deps.sandbox, null, deps.inside) : undefined;
    const setup = boxed ? setupSandbox(deps.sandbox, task, deps.inside) : undefined;
    let agent: SampleContainer | null = null;
    let workspace: PreparedWorkspace | null = null;
    const live = (): SampleContainer => {
      if (!agent) throw new StageError('run', "the sample's container is gone");
      return agent;
    };

    const separate = trial.verifierMode === 'separate' ? trial.separateVerifier : undefined;
    // Harbor's artifacts, copied out of the agent's container at collect (separate mode only).
    let artifacts: Record<string, string> = {};

    /** A container the agent never had: Harbor's separate verifier image, else a fresh one of the task's. */
    async function verifierBox(network: 'host' | 'none'): Promise<SampleContainer> {
      const asPost = (err: Error) => {
        throw err instanceof StageError ? new StageError('post', err.message) : err;
      };
      const image = separate
        ? (separate.image ??
          (await ensureContextImage(engine, `${trial!.name}-verifier`, separate.context, deps.onNotice, separate.buildTimeoutSec).catch(asPost)))
        : await ensureImage(engine, trial!, deps.onNotice).catch(asPost);
      const workdir = separate ? (separate.workdir ?? (await imageWorkdir(engine, image))) : trial!.workdir;
      const memory = separate ? separate.memoryBytes : trial!.memoryBytes;
      return startSampleContainer({
        engine,
        sampleId: `${sampleId}-verify`,
        image,
        trial: { ...trial!, workdir },
        internet: network === 'host',
        limits: withTaskMemory(deps.sandbox.limits, memory),
        cpus: (separate ? separate.cpus : trial!.cpus) ?? null,
        proxySocket: null,
        // --sandbox-ro: every sandbox sees them, the verifier's as on the host (sandbox/jail.ts).
        mounts: deps.sandbox.extraReadOnly.map((p) => ({ source: p, dest: p, readOnly: true })),
        // A fresh container of the task's image starts its services again: the verifier waits for
        // them as the agent did. Harbor's separate verifier environment gets no healthcheck (trial.py:532-569).
        ...(!separate && trial!.healthcheck ? { healthcheck: trial!.healthcheck } : {}),
      }).catch((err: Error) => {
        throw new StageError('post', `could not start the verifier's container: ${err.message}`);
      });
    }

    async function run(cmd: VerifierCommand): Promise<VerifierRun> {
      const box = await verifierBox(cmd.network);
      const rewardDir = cmd.rewardDir ? await fs.mkdtemp(path.join(await scratch(deps), 'verifier-')) : null;
      try {
        if (separate) await carrySeparate(box);
        else await carryIn(box, cmd);
        const r = await box.shell(STOP_WHEN_DONE, cmd.env, cmd.timeoutMs, cmd.user, [cmd.command]);
        // Everything the verifier started (a loop that would rewrite reward.txt) dies before its files are read.
        const full = await box.killStrays().then(
          () => null,
          async (err: unknown) => {
            // The agent's code under test.sh filled the process cap: nothing more starts there, its
            // files are not read, and forfeit() scores the cap (verdict.ts), never `error`.
            const p = await box.processes();
            if (p && nearCap(p)) return `the processes it started filled its container's process cap (${p.current} of ${p.cap})`;
            throw withCount(err, p);
          },
        );
        if (full)
          return { exitCode: r.code, signal: null, timedOut: r.timedOut, failedToStart: null, limit: full, stdout: r.stdout, stderr: r.stderr, rewardDir };
        if (rewardDir) await box.copyOut('/logs/verifier', rewardDir);
        return {
          exitCode: r.code,
          signal: null,
          timedOut: r.timedOut,
          failedToStart: r.code === null && !r.timedOut ? r.stderr.trim() || `${engine} exec failed` : null,
          limit: null,
          stdout: r.stdout,
          stderr: r.stderr,
          rewardDir,
        };
      } catch (err) {
        if (rewardDir) await fs.rm(rewardDir, { recursive: true, force: true });
        throw err instanceof StageError ? err : new StageError('post', (err as Error).message);
      } finally {
        await box.remove();
      }
    }

    /**
     * Harbor's separate verifier (trial/trial.py:463-592): /tests is the image's own (nothing
     * uploaded, verifier.py:132-139), /logs/verifier empty, and only the artifacts cross, each at its
     * source path.
     */
    async function carrySeparate(box: SampleContainer): Promise<void> {
      const owner = trial!.verifierUser !== undefined ? ' && chown -- "$1" /logs/verifier' : '';
      const made = await box.shell(`rm -rf /logs/verifier && mkdir -p /logs/verifier${owner}`, {}, 60_000, '0', [trial!.verifierUser ?? '']);
      if (made.code !== 0) throw new StageError('post', `could not make /logs/verifier in the verifier's container: ${made.stderr.trim()}`);
      await carryArtifactsIn(box, artifacts);
    }

    /** The agent's WORKDIR (and /logs/agent) into a fresh container, /logs/verifier empty, tests/ at /tests. */
    async function carryIn(box: SampleContainer, cmd: VerifierCommand): Promise<void> {
      const root = (command: string, args: string[] = []) => box.shell(command, {}, 120_000, '0', args);
      const cleared = await root('find "$1" -mindepth 1 -maxdepth 1 -exec rm -rf {} + && mkdir -p /logs/agent /logs/verifier', [box.workdir]);
      if (cleared.code !== 0) throw new StageError('post', `could not clear ${box.workdir} in the verifier's container: ${cleared.stderr.trim()}`);
      await box.copyIn(cmd.workspace, box.workdir);
      await box.copyIn(path.join(logsDir(cmd.workspace), 'agent'), '/logs/agent');
      for (const m of cmd.readOnly) await box.copyIn(m.source, m.dest);
      // /logs/verifier empty when the verifier starts, whatever the image or the copies put there:
      // a reward file present before it ran is never read (harbor-rewards.ts readRewards).
      const emptied = await root('rm -rf /logs/verifier && mkdir -p /logs/verifier');
      if (emptied.code !== 0) throw new StageError('post', `could not empty /logs/verifier in the verifier's container: ${emptied.stderr.trim()}`);
      // The files were the agent's: its user's again, as they were in its container.
      const owners = [
        ...(trial!.agentUser !== undefined ? ['chown -R -- "$2" "$1" /logs/agent'] : []),
        ...(trial!.verifierUser !== undefined ? ['chown -- "$3" /logs/verifier'] : []),
      ];
      if (owners.length > 0) {
        const owned = await root(owners.join(' && '), [box.workdir, trial!.agentUser ?? '', trial!.verifierUser ?? '']);
        if (owned.code !== 0) throw new StageError('post', `could not hand the workspace to its user in the verifier's container: ${owned.stderr.trim()}`);
      }
    }

    /**
     * After the agent (or a step of it): Harbor's collect hooks in its container (best-effort,
     * trial.py:788-818), then nothing it (or a hook) left running may touch its files; its WORKDIR
     * and /logs/agent copied out. The processes the container started with (the image's services) stay.
     */
    async function stopAndCopyOut(box: SampleContainer): Promise<void> {
      for (const hook of trial!.collect) await box.shell(hook.command, {}, hook.timeoutSec * 1000, hook.user ?? trial!.agentUser);
      await box.killStrays().catch(async (err: unknown) => {
        // A container the agent filled to its process cap (a fork bomb's sleepers) starts nothing
        // more, so polar cannot end them or look at its work there: the agent's doing, 0.
        const p = await box.processes();
        if (p && nearCap(p))
          throw new Forfeit(
            `the agent's processes filled its container's process cap (${p.current} of ${p.cap}): nothing more could run there to collect its work`,
          );
        throw withCount(err, p);
      });
      // The agent (often root here) could leave a link, or a file, where polar copies a folder
      // out: a link at /logs/agent or WORKDIR made the copy fail and the sample end `error`
      // (issue 39), or would copy whatever it points at. Its own doing: the sample scores 0.
      const seen = await box.shell(PLACES, {}, 60_000, '0', [box.workdir, '/logs/agent']);
      if (seen.code !== 0) throw new StageError('post', `could not look at ${box.workdir} and /logs/agent in the agent's container: ${seen.stderr.trim()}`);
      const [work, logs] = seen.stdout.trim().split('\n');
      // Anything but the check's own words: the agent (root) replaced the shell that ran it, so
      // nothing there can be looked at safely (the engine's copy follows links): nothing is copied
      // out, and the sample scores 0 with what the shell said.
      const said = new Set(['dir', 'link', 'file', 'missing']);
      if (!said.has(work ?? '') || !said.has(logs ?? ''))
        throw new Forfeit(`the agent replaced the shell polar checks its container with (it answered ${JSON.stringify(seen.stdout.slice(0, 80))})`);
      if (work !== 'dir')
        throw new Forfeit(`the agent left ${work === 'missing' ? 'nothing' : `a ${work}`} at ${box.workdir}, where its work is collected from`);
      if (logs !== 'dir' && logs !== 'missing') throw new Forfeit(`the agent left a ${logs} at /logs/agent, where its logs are collected from`);
      await copyWorkdirOut(box, dir);
      const agentLogs = path.join(logsDir(dir), 'agent');
      await fs.rm(agentLogs, { recursive: true, force: true });
      // Logs the agent removed are logs it does not have: an empty folder, as at the start.
      if (logs === 'missing') await fs.mkdir(agentLogs, { recursive: true });
      else await box.copyOut('/logs/agent', agentLogs);
    }

    return {
      kind: engine,
      // The task's image (and a separate verifier's), built once per process before any sample's
      // budget starts, each under its environment's build_timeout_sec.
      async provision() {
        await ensureImage(engine, trial, deps.onNotice);
        if (separate && separate.image === null)
          await ensureContextImage(engine, `${trial.name}-verifier`, separate.context, deps.onNotice, separate.buildTimeoutSec);
      },
      async prepare(deadline) {
        const home = path.join(deps.stateDir, '.polar', 'runs', sessionId, 'home');
        agent = await openTaskContainer({
          engine,
          task,
          sampleId,
          limits: deps.sandbox.limits,
          proxySocket: deps.proxySocket,
          writable: deps.modelHarness ? [{ source: home, dest: deps.inside?.home ?? home }] : [],
          // --sandbox-ro (a custom harness's script, a toolchain) at their own paths, as in the host sandbox.
          readOnly: [
            ...(deps.harnessBin ? [path.resolve(deps.harnessBin)] : []),
            ...(deps.nodeBin ? [nodePrefix(path.resolve(deps.nodeBin))] : []),
            ...deps.sandbox.extraReadOnly,
          ],
          onNotice: deps.onNotice,
        });
        const box = agent;
        // The starting state is the image's WORKDIR, copied out for the baseline.
        // The agent's diff is taken with polar's own copy of the baseline repository, never the .git the agent had.
        workspace = await keepBaseline(
          await prepareWorkspace(task, dir, deadline, baseEnvironment(), setup, gitSandbox, (dest) => containerStartingState(box, dest)),
        );
        await baselineInto(box, dir, trial.agentUser);
        return workspace;
      },
      harnessPlacement() {
        const fixed = deps.inside;
        const box = live();
        return {
          ...(fixed ? { cwdInside: fixed.workspace, homeInside: fixed.home } : {}),
          ...agentMounts(trial, dir),
          container: (port: number) => box.jail(port, trial.agentUser),
        };
      },
      async runAgentCommand(command, opts) {
        const box = live();
        for (const m of opts.readOnly) {
          await box.copyIn(m.source, m.dest).catch((err: Error) => {
            throw new StageError('run', err.message);
          });
        }
        const r = await box.shell(command, opts.env, opts.timeoutMs, trial.agentUser);
        if (r.code === null && !r.timedOut) throw new StageError('run', `the agent's command could not start: ${r.stderr.trim()}`);
        const limit = r.code === 137 && !r.timedOut ? 'killed (exit 137: the memory limit, or the container was stopped)' : null;
        return { status: r.timedOut ? 'timeout' : r.code === 0 ? 'completed' : 'failed', exitCode: r.code, limit };
      },
      async checkpoint() {
        // A step's end: its work copied out for its verifier (a fresh container, as after collect),
        // and the agent's container kept, with the image's services, for the next step.
        await stopAndCopyOut(live());
        if (!workspace) throw new StageError('post', 'the workspace was never prepared');
        return captureDiff(workspace, baseEnvironment(), gitSandbox);
      },
      async addWorkspaceFiles(hostDir) {
        const box = live();
        // What the agent left where a step's file or folder goes (a link, a file for a folder) is
        // removed first, parents before children, so the copy lands in place and through no link.
        const clear = await box.shell(CLEAR_FOR_COPY, {}, 60_000, '0', [box.workdir, ...(await entriesOf(hostDir))]);
        if (clear.code !== 0) throw new StageError('run', `could not make room for the step's files in ${box.workdir}: ${clear.stderr.trim()}`);
        await box.copyIn(hostDir, box.workdir);
        if (trial.agentUser !== undefined) {
          const owned = await box.shell('chown -R -- "$2" "$1"', {}, 60_000, '0', [box.workdir, trial.agentUser]);
          if (owned.code !== 0) throw new StageError('run', `could not hand the step's files to ${trial.agentUser}: ${owned.stderr.trim()}`);
        }
      },
      healthcheck(hc) {
        const box = live();
        return runHealthcheck(hc, async (timeoutMs) => {
          const r = await box.shell(hc.command, {}, timeoutMs, trial.agentUser);
          return r.code === 0 ? { ok: true } : { ok: false, why: r.timedOut ? `timed out after ${hc.timeoutSec} s` : `exit ${r.code}` };
        });
      },
      async collect() {
        const box = live();
        await stopAndCopyOut(box);
        if (separate) artifacts = await copyArtifactsOut(box, carriedPaths(trial), `${dir}-artifacts`);
        // The agent's container is done: the verifier gets one it never had.
        await box.remove();
        agent = null;
        if (!workspace) throw new StageError('post', 'the workspace was never prepared');
        return captureDiff(workspace, baseEnvironment(), gitSandbox);
      },
      verification: {
        environment: engine,
        place: separate ? "Harbor's separate verifier image" : "a fresh container of the task's image",
        workspaceInside: () => trial.workdir,
        run,
        freshWorkspace: async () => {
          throw new StageError('post', `a tests evaluator runs JSONL tasks on the host; --environment ${engine} runs Harbor tasks`);
        },
        applyDiff: (ws, diff, env) => applyDiff(ws, diff, env, gitSandbox),
      },
      async dispose(keep) {
        await agent?.remove();
        agent = null;
        await fs.rm(`${dir}-artifacts`, { recursive: true, force: true });
        if (!keep) await removeWorkspace(dir);
      },
    };
  };
}

/**
 * The verifier's command, then at once, in the same exec, every other process it may signal is
 * stopped (one kill(-1), which spares only init and the caller), its exit status kept. killStrays
 * after the exec is a second engine call, a tenth of a second or more later: a loop the agent's
 * program detached under test.sh, waiting for it to end, rewrote reward.txt in that gap and scored 1
 * (red-team-container.test.ts). Stopped here, it cannot write or fork; killStrays then kills it. The
 * processes that ran before the command (the keep-alive) go on, or removing the container would wait
 * out the engine's stop timeout. What is left is the instant between test.sh's end and this kill, as
 * on the host between test.sh's end and bwrap's PID namespace going: code the task runs as its own
 * user is the task's exposure (README, threat model: rewards).
 */
const STOP_WHEN_DONE = 'before=$(cd /proc && echo [0-9]*); bash -c "$1"; rc=$?; kill -STOP -1 2>/dev/null; kill -CONT $before 2>/dev/null; exit $rc';

/** For each path argument, one line: `link`, `dir`, `missing`, or `file` (anything else), never following a link. */
const PLACES =
  'for p in "$@"; do if [ -L "$p" ]; then echo link; elif [ -d "$p" ]; then echo dir; elif [ -e "$p" ]; then echo file; else echo missing; fi; done';

/** For each `d:REL` / `f:REL` after the workdir ($1): a link there, or an entry of the other kind, is removed. */
const CLEAR_FOR_COPY =
  'w=$1; shift; for e in "$@"; do k=${e%%:*}; p="$w/${e#*:}"; if [ -L "$p" ]; then rm -f -- "$p"; elif [ "$k" = d ] && [ -e "$p" ] && [ ! -d "$p" ]; then rm -f -- "$p"; elif [ "$k" = f ] && [ -d "$p" ]; then rm -rf -- "$p"; fi; done';

/** A host folder's entries, parents before children, as `d:REL` or `f:REL`. */
async function entriesOf(root: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(path.join(root, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(`d:${r}`, ...(await entriesOf(root, r)));
    else out.push(`f:${r}`);
  }
  return out;
}

async function scratch(deps: EnvironmentDeps): Promise<string> {
  await fs.mkdir(deps.scratch, { recursive: true, mode: 0o700 });
  return deps.scratch;
}

/**
 * The agent's WORKDIR gets polar's baseline repository (one commit) in place of the image's .git:
 * an image of a SWE-style task carries its repository's history, the fix among its later commits,
 * and the agent would read it there while polar's host copy was clean. As on the host, the agent
 * sees one commit, the same for every sample.
 */
async function baselineInto(box: SampleContainer, dir: string, user: string | undefined): Promise<void> {
  const git = `${box.workdir.replace(/\/+$/, '')}/.git`;
  const cleared = await box.shell('rm -rf -- "$1"', {}, 60_000, '0', [git]);
  if (cleared.code !== 0) throw new StageError('init', `could not remove the image's ${git}: ${cleared.stderr.trim()}`);
  await box.copyPathIn(path.join(dir, '.git'), git);
  if (user !== undefined) {
    const owned = await box.shell('chown -R -- "$2" "$1"', {}, 60_000, '0', [git, user]);
    if (owned.code !== 0) throw new StageError('init', `could not hand ${git} to ${user}: ${owned.stderr.trim()}`);
  }
}

/**
 * Whether a container's processes leave `exec` no room: runc's own init and the command need a few
 * of the cap, so a container a few short of it already refuses them (seen in CI: a fork bomb's
 * sleepers, with the agent's shell gone, one or two under the cap).
 */
function nearCap(p: { current: number; cap: number }): boolean {
  return p.cap > 0 && p.current >= p.cap - EXEC_HEADROOM;
}

const EXEC_HEADROOM = 16;

/** The error as it was, with the process count the engine gave (or that it gave none), for whoever reads why. */
function withCount(err: unknown, p: { current: number; cap: number } | null): Error {
  const message = (err as Error)?.message ?? String(err);
  return Object.assign(err instanceof Error ? err : new Error(message), {
    message: `${message} (the container runs ${p ? `${p.current} processes of a cap of ${p.cap}` : 'a number of processes the engine did not say'})`,
  });
}
