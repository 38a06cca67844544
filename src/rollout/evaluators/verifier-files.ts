import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { scrubSecrets } from '../../store/redact.js';

/** Per file and in all: a reason, not a transcript (the verifier's stdout is kept apart, 8 KiB). */
const FILE_TAIL = 2048;
const TOTAL = 8192;
const MAX_FILES = 6;
/** Harbor's own names first: verifier.py sends test.sh's stdout to test-stdout.txt (trial/paths.py:233-237). */
const FIRST = ['test-stdout.txt', 'test-stderr.txt'];
const REWARD_FILES = new Set(['reward.txt', 'reward.json']);

/**
 * The files a Harbor verifier wrote under /logs/verifier besides its reward files, each by its path
 * there and its tail (last 2 KiB, 8 KiB in all, at most six files, secrets scrubbed): where a
 * test.sh that redirects its output, as Harbor's own verifier does (verifier/verifier.py:215-226),
 * says why it paid 0. The folder may hold what the agent's code wrote under test.sh, so only
 * regular files are read, never through a link, and a file that looks binary is left out.
 */
export async function verifierFiles(dir: string, secrets: readonly string[]): Promise<Record<string, string>> {
  const found: string[] = [];
  await walk(dir, '', 0, found);
  const rank = (f: string) => (FIRST.includes(f) ? FIRST.indexOf(f) : FIRST.length);
  found.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const out: Record<string, string> = {};
  let left = TOTAL;
  for (const rel of found.slice(0, MAX_FILES)) {
    if (left <= 0) break;
    const tail = await readTail(path.join(dir, rel), Math.min(FILE_TAIL, left));
    if (tail === null || tail.trim() === '') continue;
    out[rel] = scrubSecrets(tail, secrets);
    left -= tail.length;
  }
  return out;
}

/** Regular files under dir, two folders deep at most, by their path relative to it. */
async function walk(dir: string, rel: string, depth: number, found: string[]): Promise<void> {
  let entries: import('node:fs').Dirent[];
  try {
    entries = await fs.readdir(path.join(dir, rel), { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    const name = rel ? `${rel}/${e.name}` : e.name;
    if (e.isFile() && !(rel === '' && REWARD_FILES.has(e.name))) found.push(name);
    else if (e.isDirectory() && depth < 2) await walk(dir, name, depth + 1, found);
    if (found.length > 64) return;
  }
}

/** A regular file's last `max` bytes as text (a leading cut marked …), or null when it is not one or looks binary. */
async function readTail(file: string, max: number): Promise<string | null> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) return null;
    const length = Math.min(st.size, max);
    const { buffer, bytesRead } = await handle.read({ buffer: Buffer.alloc(length), position: st.size - length });
    const bytes = buffer.subarray(0, bytesRead);
    if (bytes.includes(0)) return null;
    const text = bytes.toString('utf8');
    return st.size > length ? `…${text}` : text;
  } finally {
    await handle.close();
  }
}

/** A few lines of each verifier file, for a report: `/logs/verifier/<file>:` then its last lines. */
export function verifierFilesLines(files: Record<string, string> | null | undefined, lines = 10): string[] {
  const out: string[] = [];
  for (const [name, text] of Object.entries(files ?? {})) {
    out.push(`/logs/verifier/${name} (its last lines):`);
    out.push(
      ...text
        .trimEnd()
        .split('\n')
        .slice(-lines)
        .map((l) => `| ${l}`),
    );
  }
  return out;
}
