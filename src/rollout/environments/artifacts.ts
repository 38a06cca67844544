import fs from 'node:fs/promises';
import path from 'node:path';
import { Forfeit, StageError } from '../stage-error.js';
import type { Box } from '../boxes/types.js';
import type { HarborArtifact } from '../harbor/types.js';
import { matchesGlob } from '../../core/glob.js';

/**
 * At most this much of the agent's artifacts crosses to a separate verifier. Past it the sample
 * forfeits (stage-error.ts Forfeit): the agent wrote them, so over the cap is its own doing, not `error`.
 */
const ARTIFACTS_MAX_BYTES = 1024 ** 3;

/**
 * Harbor's artifacts out of the agent's container (trial/artifact_handler.py:189-233, after its
 * processes are dead), into `hostRoot/<i>`. They are the agent's data: links, devices and FIFOs in
 * them are dropped (never followed on the host), `exclude` patterns left out, the total capped. A
 * path that does not exist is skipped, as Harbor's copy is best-effort (:304-356).
 */
export async function copyArtifactsOut(box: Box, carried: readonly HarborArtifact[], hostRoot: string): Promise<Record<string, string>> {
  await fs.mkdir(hostRoot, { recursive: true, mode: 0o700 });
  const out: Record<string, string> = {};
  let budget = ARTIFACTS_MAX_BYTES;
  for (const [i, a] of carried.entries()) {
    const host = path.join(hostRoot, String(i));
    if (!(await box.copyPathOut(a.source, host))) continue;
    budget = await keepPlain(host, host, a.exclude, budget);
    if (budget < 0) throw new Forfeit(`the agent's artifacts exceed ${ARTIFACTS_MAX_BYTES} bytes (${a.source})`);
    out[a.source] = host;
  }
  return out;
}

/** Into the verifier's container, each at its source path (a folder there emptied first, parents made). */
export async function carryArtifactsIn(box: Box, copies: Readonly<Record<string, string>>): Promise<void> {
  for (const [source, host] of Object.entries(copies)) {
    const made = await box.shell('rm -rf -- "$1" && mkdir -p -- "$(dirname -- "$1")"', {}, 60_000, '0', [source]);
    if (made.code !== 0) throw new StageError('post', `could not make room for ${source} in the verifier's container: ${made.stderr.trim()}`);
    await box.copyPathIn(host, source);
  }
}

/**
 * The host environment's artifacts for a separate verifier: each path the task carries that lies
 * under WORKDIR (from the collected workspace) or is /logs/artifacts (from the sample's /logs),
 * copied into a fresh folder tree of the same shape, links and devices dropped. Other absolute paths
 * lived in the agent sandbox's private folders, gone with it: they are listed as not carried.
 */
export async function hostArtifacts(
  carried: readonly HarborArtifact[],
  from: { workdir: string; workspace: string; logs: string },
  into: { workspace: string; logs: string },
): Promise<string[]> {
  const lost: string[] = [];
  let budget = ARTIFACTS_MAX_BYTES;
  await fs.mkdir(into.workspace, { recursive: true, mode: 0o700 });
  await fs.mkdir(into.logs, { recursive: true, mode: 0o700 });
  for (const a of carried) {
    const src = a.source.replace(/\/+$/, '');
    const under = (root: string) => (src === root ? '' : src.startsWith(`${root}/`) ? src.slice(root.length + 1) : null);
    const inWork = under(from.workdir.replace(/\/+$/, ''));
    const inLogs = under('/logs');
    const pair = inWork !== null ? [from.workspace, into.workspace, inWork] : inLogs !== null ? [from.logs, into.logs, inLogs] : null;
    if (!pair) {
      lost.push(a.source);
      continue;
    }
    const [fromRoot, toRoot, rel] = pair as [string, string, string];
    const origin = path.join(fromRoot, rel);
    // A link the agent left on the way (/logs/artifacts -> /) would be followed on the host.
    const link = await linkOnTheWay(fromRoot, rel);
    if (link !== null) throw new Forfeit(`the agent left a link at ${link} on the way to its artifact ${a.source}; polar follows none`);
    if (!(await fs.lstat(origin).catch(() => null))) continue;
    const dest = path.join(toRoot, rel);
    await fs.mkdir(path.dirname(dest), { recursive: true });
    await fs.cp(origin, dest, { recursive: true, verbatimSymlinks: true, force: true });
    budget = await keepPlain(dest, dest, a.exclude, budget);
    if (budget < 0) throw new Forfeit(`the agent's artifacts exceed ${ARTIFACTS_MAX_BYTES} bytes (${a.source})`);
  }
  return lost;
}

/** The first folder of `rel` under `root` that is a link (named relative to `root`), or null. The last part may be one: cp copies it as a link and keepPlain drops it. */
async function linkOnTheWay(root: string, rel: string): Promise<string | null> {
  const parts = rel.split('/').filter((p) => p !== '');
  for (let i = 1; i < parts.length; i++) {
    const st = await fs.lstat(path.join(root, ...parts.slice(0, i))).catch(() => null);
    if (!st) return null;
    if (st.isSymbolicLink()) return parts.slice(0, i).join('/');
  }
  return null;
}

/** Removes what is not a regular file or folder (and what `exclude` names); returns the budget left. */
async function keepPlain(root: string, p: string, exclude: readonly string[], budget: number): Promise<number> {
  const st = await fs.lstat(p);
  const rel = path.relative(root, p).split(path.sep).join('/');
  if (rel !== '' && exclude.length > 0 && (matchesGlob(rel, exclude) || matchesGlob(path.basename(p), exclude))) {
    await fs.rm(p, { recursive: true, force: true });
    return budget;
  }
  if (st.isFile()) return budget - st.size;
  if (!st.isDirectory()) {
    await fs.rm(p, { force: true });
    return budget;
  }
  for (const name of await fs.readdir(p)) {
    budget = await keepPlain(root, path.join(p, name), exclude, budget);
    if (budget < 0) return budget;
  }
  return budget;
}
