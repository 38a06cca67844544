import fs from 'node:fs/promises';
import path from 'node:path';
import { baseEnvironment } from '../../../harness/env.js';
import { logsDir } from '../../harbor/trial.js';
import type { HarborArtifact, HarborCollect } from '../../harbor/types.js';
import { carriedPaths } from '../../harbor/verifier-config.js';
import { Forfeit, StageError } from '../../stage-error.js';
import { captureDiff } from '../../workspace.js';
import { copyArtifactsOut } from '../artifacts.js';
import { nearCap, withCount } from './caps.js';
import { copyWorkdirOut } from './open.js';
import { type AgentBox, type BoxSample, live, prepared } from './state.js';

/** For each path argument, one line: `link`, `dir`, `missing`, or `file` (anything else), never following a link. */
const PLACES =
  'for p in "$@"; do if [ -L "$p" ]; then echo link; elif [ -d "$p" ]; then echo dir; elif [ -e "$p" ]; then echo file; else echo missing; fi; done';

/**
 * After the agent: its work copied out and a separate verifier's artifacts of its box, the box
 * removed (the verifier gets one it never had), then the hooks and artifacts of its services, the diff.
 */
export async function collect(s: BoxSample): Promise<string> {
  const box = live(s);
  await stopAndCopyOut(s, box);
  const carried = s.separate ? carriedPaths(s.trial) : [];
  const own = await copyArtifactsOut(box, carried.filter(onMain), `${s.spec.dir}-artifacts`);
  await box.remove();
  s.agent = null;
  s.artifacts = {
    ...own,
    ...(await fromServices(
      s,
      carried.filter((a) => !onMain(a)),
    )),
  };
  return captureDiff(prepared(s), baseEnvironment(), s.gitSandbox);
}

/**
 * A step's end: its work copied out for its verifier (a fresh box, as after collect), and the
 * agent's box kept, with the image's services, for the next step (multi_step.py:36-59).
 */
export async function checkpoint(s: BoxSample): Promise<string> {
  await stopAndCopyOut(s, live(s));
  return captureDiff(prepared(s), baseEnvironment(), s.gitSandbox);
}

/** An artifact or hook of the agent's own box (no `service`, or `main`). */
const onMain = (x: { service?: string }): boolean => x.service === undefined || x.service === 'main';

/**
 * Once the agent's box is down, the collect hooks of its services, then their artifacts (config.py:
 * 628-659: a hook for a sidecar runs after the main container is stopped, so the agent cannot
 * interfere; artifact_handler.py:189-233).
 */
async function fromServices(s: BoxSample, artifacts: readonly HarborArtifact[]): Promise<Record<string, string>> {
  for (const hook of s.trial.collect.filter((h) => !onMain(h))) await runHook(s, hook);
  const out: Record<string, string> = {};
  for (const [i, a] of artifacts.entries()) {
    // Best-effort, as Harbor's copy is (artifact_handler.py:304-356): a sidecar the agent crashed
    // (its container gone) leaves the artifact out, and the verifier grades what it has; never `error`.
    const copied = await copyArtifactsOut(serviceBox(s, a.service), [a], `${s.spec.dir}-artifacts/${i}-${a.service}`).catch((err: Error) => {
      if (err instanceof Forfeit) throw err;
      s.deps.onNotice(`artifact ${a.source} of compose service ${a.service} was not copied: ${err.message}`);
      return {};
    });
    Object.assign(out, copied);
  }
  return out;
}

/** A running service's box by its compose name, or a stage error naming it. */
function serviceBox(s: BoxSample, service: string | undefined): AgentBox {
  const box = service === undefined ? undefined : s.services?.box(service);
  if (!box) throw new StageError('post', `no compose service ${service} is running (task.toml names it in artifacts or [[verifier.collect]])`);
  return box;
}

/** A collect hook in its service's box (best-effort, as Harbor's: its failure is only noted). */
async function runHook(s: BoxSample, hook: HarborCollect): Promise<void> {
  const target = onMain(hook) ? live(s) : serviceBox(s, hook.service);
  const r = await target.shell(hook.command, {}, hook.timeoutSec * 1000, hook.user ?? (target === s.agent ? s.trial.agentUser : undefined));
  if (r.code !== 0)
    s.deps.onNotice(`[[verifier.collect]] in ${hook.service ?? 'main'} ended ${r.timedOut ? 'at its timeout' : `with exit ${r.code}`}: ${hook.command}`);
}

/**
 * After the agent (or a step of it): Harbor's collect hooks for its box (best-effort,
 * trial.py:788-818), then nothing it (or a hook) left running may touch its files; its WORKDIR
 * and /logs/agent copied out. The processes the box started with (the image's services) stay.
 */
async function stopAndCopyOut(s: BoxSample, box: AgentBox): Promise<void> {
  for (const hook of s.trial.collect.filter(onMain)) await runHook(s, hook);
  await endAgentStrays(box);
  const { logs } = await placesOf(box);
  await copyWorkdirOut(box, s.spec.dir);
  const agentLogs = path.join(logsDir(s.spec.dir), 'agent');
  await fs.rm(agentLogs, { recursive: true, force: true });
  // Logs the agent removed are logs it does not have: an empty folder, as at the start.
  if (logs === 'missing') await fs.mkdir(agentLogs, { recursive: true });
  else await box.copyOut('/logs/agent', agentLogs);
}

/**
 * A box the agent filled to its process cap (a fork bomb's sleepers) starts nothing more, so polar
 * cannot end them or look at its work there: the agent's doing, 0.
 */
async function endAgentStrays(box: AgentBox): Promise<void> {
  try {
    await box.killStrays();
  } catch (err) {
    const p = (await box.processes?.()) ?? null;
    if (p && nearCap(p))
      throw new Forfeit(
        `the agent's processes filled its container's process cap (${p.current} of ${p.cap}): nothing more could run there to collect its work`,
      );
    throw withCount(err, p);
  }
}

/**
 * What is at WORKDIR and /logs/agent, never following a link. The agent (often root here) could
 * leave a link, or a file, where polar copies a folder out: a link made the copy fail and the sample
 * end `error` (issue 39), or would copy whatever it points at. Its own doing: the sample scores 0.
 */
async function placesOf(box: AgentBox): Promise<{ work: string; logs: string }> {
  const seen = await box.sh(PLACES, [box.workdir, '/logs/agent']);
  if (seen.code !== 0) throw new StageError('post', `could not look at ${box.workdir} and /logs/agent in the agent's container: ${seen.stderr.trim()}`);
  const [work = '', logs = ''] = seen.stdout.trim().split('\n');
  // Anything but the check's own words: the agent (root) replaced the shell that ran it, so
  // nothing there can be looked at safely (the engine's copy follows links): nothing is copied
  // out, and the sample scores 0 with what the shell said.
  const said = new Set(['dir', 'link', 'file', 'missing']);
  if (!said.has(work) || !said.has(logs))
    throw new Forfeit(`the agent replaced the shell polar checks its container with (it answered ${JSON.stringify(seen.stdout.slice(0, 80))})`);
  if (work !== 'dir') throw new Forfeit(`the agent left ${work === 'missing' ? 'nothing' : `a ${work}`} at ${box.workdir}, where its work is collected from`);
  if (logs !== 'dir' && logs !== 'missing') throw new Forfeit(`the agent left a ${logs} at /logs/agent, where its logs are collected from`);
  return { work, logs };
}
