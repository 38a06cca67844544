import fs from 'node:fs/promises';
import path from 'node:path';
import { runHealthcheck } from '../../boxes/healthcheck.js';
import type { HarborHealthcheck } from '../../harbor/types.js';
import { StageError } from '../../stage-error.js';
import { type BoxSample, live } from './state.js';

/** For each `d:REL` / `f:REL` after the workdir ($1): a link there, or an entry of the other kind, is removed. */
const CLEAR_FOR_COPY =
  'w=$1; shift; for e in "$@"; do k=${e%%:*}; p="$w/${e#*:}"; if [ -L "$p" ]; then rm -f -- "$p"; elif [ "$k" = d ] && [ -e "$p" ] && [ ! -d "$p" ]; then rm -f -- "$p"; elif [ "$k" = f ] && [ -d "$p" ]; then rm -rf -- "$p"; fi; done';

/**
 * Before a step: steps/<name>/workdir/ into the agent's WORKDIR as its own (multi_step.py:513-522).
 * What the agent left where a step's file or folder goes (a link, a file for a folder) is removed
 * first, parents before children, so the copy lands in place and through no link.
 */
export async function addWorkspaceFiles(s: BoxSample, hostDir: string): Promise<void> {
  const box = live(s);
  const clear = await box.sh(CLEAR_FOR_COPY, [box.workdir, ...(await entriesOf(hostDir))]);
  if (clear.code !== 0) throw new StageError('run', `could not make room for the step's files in ${box.workdir}: ${clear.stderr.trim()}`);
  await box.copyIn(hostDir, box.workdir);
  const user = s.trial.agentUser;
  if (user === undefined) return;
  const owned = await box.sh('chown -R -- "$2" "$1"', [box.workdir, user]);
  if (owned.code !== 0) throw new StageError('run', `could not hand the step's files to ${user}: ${owned.stderr.trim()}`);
}

/** A step's healthcheck in the agent's box now, as the agent's user (multi_step.py:550-562): null once it passes. */
export function stepHealthcheck(s: BoxSample, hc: HarborHealthcheck): Promise<string | null> {
  const box = live(s);
  return runHealthcheck(hc, async (timeoutMs) => {
    const r = await box.shell(hc.command, {}, timeoutMs, s.trial.agentUser);
    return r.code === 0 ? { ok: true } : { ok: false, why: r.timedOut ? `timed out after ${hc.timeoutSec} s` : `exit ${r.code}` };
  });
}

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
