import fs from 'node:fs/promises';
import path from 'node:path';
import { baseEnvironment } from '../../../harness/env.js';
import { nodePrefix } from '../../../sandbox/runtime-mounts.js';
import type { BoxProvider } from '../../boxes/types.js';
import { agentMounts } from '../../harbor/trial.js';
import { evaluatorSandbox, setupSandbox } from '../../sandboxing.js';
import { StageError } from '../../stage-error.js';
import { applyDiff, keepBaseline, prepareWorkspace, removeWorkspace } from '../../workspace.js';
import type { EnvironmentDeps, SampleSpec } from '../deps.js';
import type { AgentCommandEnd, AgentCommandOptions, HarnessPlacement, SampleEnvironment } from '../types.js';
import { checkpoint, collect } from './collect.js';
import { provisionImages } from './images.js';
import { type AgentMounts, containerStartingState, openAgentBox } from './open.js';
import { provisionServices, startTaskServices } from './services.js';
import { addWorkspaceFiles, stepHealthcheck } from './steps.js';
import { type BoxSample, live } from './state.js';
import { runVerifier } from './verify.js';

/**
 * A Harbor task in its own image, in a box provider's boxes (`--environment docker|podman`, or any
 * provider in boxes/registry.ts). The agent works in the sample's box (a compose task's services
 * beside it on their own network); after it, the task's collect hooks run, everything left running
 * there is killed, its WORKDIR and /logs/agent (and a separate verifier's artifacts) are copied
 * out, and the box is removed. The verifier then runs in a box the agent never had: Harbor's
 * separate verifier image where the task asks for one (`[verifier] environment_mode = "separate"`:
 * only the artifacts cross), else a fresh box of the task's image with the agent's WORKDIR and
 * /logs/agent carried in. That is polar's default where Harbor's is the agent's own container:
 * there the agent (often root) could replace what test.sh runs (/usr/bin/bash, the Python it
 * imports) or leave a process that rewrites the reward. In a fresh box whatever it did to the
 * system is gone; only its files in WORKDIR reach the verifier, which is what a task grades. A task
 * that grades state outside WORKDIR (an installed package, a service's config) names it as an
 * artifact in separate mode.
 */
export function boxEnvironment(provider: BoxProvider) {
  return (deps: EnvironmentDeps, spec: SampleSpec): SampleEnvironment => {
    const s = newSample(provider, deps, spec);
    return {
      kind: provider.name,
      provision: async () => {
        await provisionImages(s);
        await provisionServices(s);
      },
      prepare: (deadline) => prepare(s, deadline),
      harnessPlacement: () => placement(s),
      runAgentCommand: (command, opts) => agentCommand(s, command, opts),
      checkpoint: () => checkpoint(s),
      addWorkspaceFiles: (hostDir) => addWorkspaceFiles(s, hostDir),
      healthcheck: (hc) => stepHealthcheck(s, hc),
      collect: () => collect(s),
      verification: {
        environment: provider.name,
        place: s.separate ? "Harbor's separate verifier image" : "a fresh container of the task's image",
        workspaceInside: () => s.trial.workdir,
        run: (cmd) => runVerifier(s, cmd),
        freshWorkspace: async () => {
          throw new StageError('post', `a tests evaluator runs JSONL tasks on the host; --environment ${provider.name} runs Harbor tasks`);
        },
        applyDiff: (ws, diff, env) => applyDiff(ws, diff, env, s.gitSandbox),
      },
      dispose: (keep) => dispose(s, keep),
    };
  };
}

function newSample(provider: BoxProvider, deps: EnvironmentDeps, spec: SampleSpec): BoxSample {
  const trial = spec.task.harbor;
  if (!trial)
    throw new StageError('init', `--environment ${provider.name} runs Harbor task folders; task ${spec.task.id} is a JSONL task (use --environment host)`);
  const boxed = deps.sandbox.kind !== 'none';
  return {
    provider,
    deps,
    spec,
    trial,
    separate: trial.verifierMode === 'separate' ? trial.separateVerifier : undefined,
    gitSandbox: boxed ? evaluatorSandbox(deps.sandbox, null, deps.inside) : undefined,
    setup: boxed ? setupSandbox(deps.sandbox, spec.task, deps.inside) : undefined,
    agent: null,
    plan: null,
    services: null,
    workspace: null,
    networks: new Map(),
    artifacts: {},
  };
}

/** INIT: the task's services, the agent's box, its WORKDIR copied out as the starting state, polar's baseline put in. */
async function prepare(s: BoxSample, deadline: number) {
  const { spec } = s;
  s.services = await startTaskServices(s);
  s.agent = await openAgentBox(s, agentMountsOf(s));
  const box = s.agent;
  // The starting state is the image's WORKDIR, copied out for the baseline. The agent's diff is
  // taken with polar's own copy of the baseline repository, never the .git the agent had.
  const fill = (dest: string) => containerStartingState(box, dest);
  s.workspace = await keepBaseline(await prepareWorkspace(spec.task, spec.dir, deadline, baseEnvironment(), s.setup, s.gitSandbox, fill));
  await baselineInto(s);
  return s.workspace;
}

/** The harness's private home (written) and its runtime and --sandbox-ro paths (read), at their own paths. */
function agentMountsOf(s: BoxSample): AgentMounts {
  const { deps, spec } = s;
  const home = path.join(deps.stateDir, '.polar', 'runs', spec.sessionId, 'home');
  return {
    writable: deps.modelHarness ? [{ source: home, dest: deps.inside?.home ?? home }] : [],
    readOnly: [
      ...(deps.harnessBin ? [path.resolve(deps.harnessBin)] : []),
      ...(deps.nodeBin ? [nodePrefix(path.resolve(deps.nodeBin))] : []),
      ...deps.sandbox.extraReadOnly,
    ],
  };
}

/**
 * The agent's WORKDIR gets polar's baseline repository (one commit) in place of the image's .git:
 * an image of a SWE-style task carries its repository's history, the fix among its later commits,
 * and the agent would read it there while polar's host copy was clean. As on the host, the agent
 * sees one commit, the same for every sample.
 */
async function baselineInto(s: BoxSample): Promise<void> {
  const box = live(s);
  const user = s.trial.agentUser;
  const git = `${box.workdir.replace(/\/+$/, '')}/.git`;
  const cleared = await box.sh('rm -rf -- "$1"', [git]);
  if (cleared.code !== 0) throw new StageError('init', `could not remove the image's ${git}: ${cleared.stderr.trim()}`);
  await box.copyPathIn(path.join(s.spec.dir, '.git'), git);
  if (user === undefined) return;
  const owned = await box.sh('chown -R -- "$2" "$1"', [git, user]);
  if (owned.code !== 0) throw new StageError('init', `could not hand ${git} to ${user}: ${owned.stderr.trim()}`);
}

/** RUNNING: the harness inside the agent's box, where the provider can host it. */
function placement(s: BoxSample): HarnessPlacement {
  const fixed = s.deps.inside;
  const box = live(s);
  const jail = box.jail;
  if (!jail) throw new StageError('run', `the ${s.provider.name} provider cannot run a harness inside its boxes (it has no HarnessHost power)`);
  return {
    ...(fixed ? { cwdInside: fixed.workspace, homeInside: fixed.home } : {}),
    ...agentMounts(s.trial, s.spec.dir),
    container: (port: number) => jail.call(box, port, s.trial.agentUser),
  };
}

/** RUNNING without a model: one shell command as the agent (the oracle's solve.sh), host folders copied in first. */
async function agentCommand(s: BoxSample, command: string, opts: AgentCommandOptions): Promise<AgentCommandEnd> {
  const box = live(s);
  for (const m of opts.readOnly) {
    await box.copyIn(m.source, m.dest).catch((err: Error) => {
      throw new StageError('run', err.message, { cause: err });
    });
  }
  const r = await box.shell(command, opts.env, opts.timeoutMs, s.trial.agentUser);
  if (r.code === null && !r.timedOut) throw new StageError('run', `the agent's command could not start: ${r.stderr.trim()}`);
  const limit = r.code === 137 && !r.timedOut ? 'killed (exit 137: the memory limit, or the container was stopped)' : null;
  return { status: r.timedOut ? 'timeout' : r.code === 0 ? 'completed' : 'failed', exitCode: r.code, limit };
}

/** Removes what the sample made: its boxes, its services and their network, its artifacts, its workspace unless kept. */
async function dispose(s: BoxSample, keep: boolean): Promise<void> {
  await s.agent?.remove();
  s.agent = null;
  await s.services?.remove();
  s.services = null;
  for (const name of s.networks.values()) await s.provider.networks?.remove(name);
  s.networks.clear();
  await fs.rm(`${s.spec.dir}-artifacts`, { recursive: true, force: true });
  if (!keep) await removeWorkspace(s.spec.dir);
}
