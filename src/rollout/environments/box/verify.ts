import fs from 'node:fs/promises';
import path from 'node:path';
import { logsDir } from '../../harbor/trial.js';
import type { SeparateVerifier } from '../../harbor/types.js';
import { StageError } from '../../stage-error.js';
import { carryArtifactsIn } from '../artifacts.js';
import type { VerifierCommand, VerifierRun } from '../types.js';
import { nearCap, withCount } from './caps.js';
import { separateVerifierImage, taskImage } from './images.js';
import { withTaskMemory } from './open.js';
import { boxEnv, boxNetwork, mainHealthcheck } from './services.js';
import type { AgentBox, BoxSample } from './state.js';

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

/**
 * One verifier command in a box the agent never had: Harbor's separate verifier image where the
 * task asks for one (only the artifacts cross), else a fresh box of the task's image with the
 * agent's WORKDIR and /logs/agent carried in. Its files come back once everything it started is dead.
 */
export async function runVerifier(s: BoxSample, cmd: VerifierCommand): Promise<VerifierRun> {
  const box = await verifierBox(s, cmd.network);
  const rewardDir = cmd.rewardDir ? await fs.mkdtemp(path.join(await scratch(s), 'verifier-')) : null;
  try {
    if (s.separate) await carrySeparate(s, box);
    else await carryIn(s, box, cmd);
    const r = await box.shell(STOP_WHEN_DONE, cmd.env, cmd.timeoutMs, cmd.user, [cmd.command]);
    const full = await endStrays(box);
    const ended = { exitCode: r.code, signal: null, timedOut: r.timedOut, stdout: r.stdout, stderr: r.stderr, rewardDir };
    if (full) return { ...ended, failedToStart: null, limit: full };
    if (rewardDir) await box.copyOut('/logs/verifier', rewardDir);
    const failedToStart = r.code === null && !r.timedOut ? r.stderr.trim() || `${s.provider.name} exec failed` : null;
    return { ...ended, failedToStart, limit: null };
  } catch (err) {
    if (rewardDir) await fs.rm(rewardDir, { recursive: true, force: true });
    throw err instanceof StageError ? err : new StageError('post', (err as Error).message, { cause: err });
  } finally {
    await box.remove();
  }
}

/**
 * Everything the verifier started (a loop that would rewrite reward.txt) dies before its files are
 * read: null, or the cap the agent's code under test.sh filled (nothing more starts there, its files
 * are not read, and forfeit() scores the cap, never `error`).
 */
async function endStrays(box: AgentBox): Promise<string | null> {
  try {
    await box.killStrays();
    return null;
  } catch (err) {
    const p = (await box.processes?.()) ?? null;
    if (p && nearCap(p)) return `the processes it started filled its container's process cap (${p.current} of ${p.cap})`;
    throw withCount(err, p);
  }
}

/** A box the agent never had: Harbor's separate verifier image, else a fresh one of the task's (on the services' network). */
async function verifierBox(s: BoxSample, network: 'host' | 'none'): Promise<AgentBox> {
  const { trial, deps, separate } = s;
  const asPost = (err: Error): never => {
    throw err instanceof StageError ? new StageError('post', err.message, { cause: err }) : err;
  };
  const image = await (separate ? separateVerifierImage(s, separate) : taskImage(s)).catch(asPost);
  const own = separate ? await separateSettings(s, separate, image) : { workdir: trial.workdir, memory: trial.memoryBytes, cpus: trial.cpus };
  const services = !separate && s.services;
  const healthcheck = mainHealthcheck(s);
  const net = services ? services.mainNetwork : await boxNetwork(s, `${s.spec.sampleId}.verify`, network === 'host');
  return s.provider
    .start({
      id: `${s.spec.sampleId}.verify`,
      image,
      workdir: own.workdir,
      hostname: 'polar-sandbox',
      network: net,
      limits: withTaskMemory(deps.sandbox.limits, own.memory),
      cpus: own.cpus ?? null,
      // --sandbox-ro: every sandbox sees them, the verifier's as on the host (sandbox/jail.ts).
      mounts: deps.sandbox.extraReadOnly.map((p) => ({ source: p, dest: p, readOnly: true })),
      // A fresh box of the task's image starts its services again: the verifier waits for them as
      // the agent did. Harbor's separate verifier environment gets no healthcheck (trial.py:532-569).
      ...(!separate && healthcheck ? { healthcheck } : {}),
      ...(!separate ? { env: boxEnv(s) } : {}),
    })
    .catch((err: Error) => {
      throw new StageError('post', `could not start the verifier's container: ${err.message}`, { cause: err });
    });
}

async function separateSettings(s: BoxSample, v: SeparateVerifier, image: string) {
  return { workdir: v.workdir ?? (await s.provider.imageWorkdir(image)), memory: v.memoryBytes, cpus: v.cpus };
}

/**
 * Harbor's separate verifier (trial/trial.py:463-592): /tests is the image's own (nothing
 * uploaded, verifier.py:132-139), /logs/verifier empty, and only the artifacts cross, each at its
 * source path.
 */
async function carrySeparate(s: BoxSample, box: AgentBox): Promise<void> {
  const user = s.trial.verifierUser;
  const owner = user !== undefined ? ' && chown -- "$1" /logs/verifier' : '';
  const made = await box.sh(`rm -rf /logs/verifier && mkdir -p /logs/verifier${owner}`, [user ?? '']);
  if (made.code !== 0) throw new StageError('post', `could not make /logs/verifier in the verifier's container: ${made.stderr.trim()}`);
  await carryArtifactsIn(box, s.artifacts);
}

/** The agent's WORKDIR (and /logs/agent) into a fresh box, /logs/verifier empty, tests/ at /tests. */
async function carryIn(s: BoxSample, box: AgentBox, cmd: VerifierCommand): Promise<void> {
  const cleared = await box.sh('find "$1" -mindepth 1 -maxdepth 1 -exec rm -rf {} + && mkdir -p /logs/agent /logs/verifier', [box.workdir], 120_000);
  if (cleared.code !== 0) throw new StageError('post', `could not clear ${box.workdir} in the verifier's container: ${cleared.stderr.trim()}`);
  await box.copyIn(cmd.workspace, box.workdir);
  await box.copyIn(path.join(logsDir(cmd.workspace), 'agent'), '/logs/agent');
  for (const m of cmd.readOnly) await box.copyIn(m.source, m.dest);
  // /logs/verifier empty when the verifier starts, whatever the image or the copies put there:
  // a reward file present before it ran is never read (harbor-rewards.ts readRewards).
  const emptied = await box.sh('rm -rf /logs/verifier && mkdir -p /logs/verifier');
  if (emptied.code !== 0) throw new StageError('post', `could not empty /logs/verifier in the verifier's container: ${emptied.stderr.trim()}`);
  await ownersBack(s, box);
}

/** The files were the agent's: its user's again, as they were in its box; /logs/verifier the verifier user's. */
async function ownersBack(s: BoxSample, box: AgentBox): Promise<void> {
  const { agentUser, verifierUser } = s.trial;
  const owners = [
    ...(agentUser !== undefined ? ['chown -R -- "$2" "$1" /logs/agent'] : []),
    ...(verifierUser !== undefined ? ['chown -- "$3" /logs/verifier'] : []),
  ];
  if (owners.length === 0) return;
  const owned = await box.sh(owners.join(' && '), [box.workdir, agentUser ?? '', verifierUser ?? ''], 120_000);
  if (owned.code !== 0) throw new StageError('post', `could not hand the workspace to its user in the verifier's container: ${owned.stderr.trim()}`);
}

async function scratch(s: BoxSample): Promise<string> {
  await fs.mkdir(s.deps.scratch, { recursive: true, mode: 0o700 });
  return s.deps.scratch;
}
