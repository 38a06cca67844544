import fs from 'node:fs/promises';
import path from 'node:path';
import { StageError } from '../stage-error.js';
import type { SampleContainer } from '../harbor/container.js';
import type { HarborArtifact } from '../harbor/types.js';
import { isTestFile } from '../evaluators/test-files.js';

/** At most this much of the agent's artifacts crosses to a separate verifier. */
const ARTIFACTS_MAX_BYTES = 1024 ** 3;

/**
 * Harbor's artifacts out of the agent's container (trial/artifact_handler.py:189-233, after its
 * processes are dead), into `hostRoot/<i>`. They are the agent's data: links, devices and FIFOs in
 * them are dropped (never followed on the host), `exclude` patterns left out, the total capped. A
 * path that does not exist is skipped, as Harbor's copy is best-effort (:304-356).
 */
export async function copyArtifactsOut(box: SampleContainer, carried: readonly HarborArtifact[], hostRoot: string): Promise<Record<string, string>> {
  await fs.mkdir(hostRoot, { recursive: true, mode: 0o700 });
  const out: Record<string, string> = {};
  let budget = ARTIFACTS_MAX_BYTES;
  for (const [i, a] of carried.entries()) {
    const host = path.join(hostRoot, String(i));
    if (!(await box.copyPathOut(a.source, host))) continue;
    budget = await keepPlain(host, host, a.exclude, budget);
    if (budget < 0) throw new StageError('post', `the agent's artifacts exceed ${ARTIFACTS_MAX_BYTES} bytes (${a.source})`);
    out[a.source] = host;
  }
  return out;
}

/** Into the verifier's container, each at its source path (a folder there emptied first, parents made). */
export async function carryArtifactsIn(box: SampleContainer, copies: Readonly<Record<string, string>>): Promise<void> {
  for (const [source, host] of Object.entries(copies)) {
    const made = await box.shell('rm -rf -- "$1" && mkdir -p -- "$(dirname -- "$1")"', {}, 60_000, '0', [source]);
    if (made.code !== 0) throw new StageError('post', `could not make room for ${source} in the verifier's container: ${made.stderr.trim()}`);
    await box.copyPathIn(host, source);
  }
}

/** Removes what is not a regular file or folder (and what `exclude` names); returns the budget left. */
async function keepPlain(root: string, p: string, exclude: readonly string[], budget: number): Promise<number> {
  const st = await fs.lstat(p);
  const rel = path.relative(root, p).split(path.sep).join('/');
  if (rel !== '' && exclude.length > 0 && (isTestFile(rel, exclude) || isTestFile(path.basename(p), exclude))) {
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
