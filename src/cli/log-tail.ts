import fs from 'node:fs';
import path from 'node:path';
import { localStateDir } from '../store/postgres/url.js';
import type { SampleRow } from '../store/rollouts.js';
import type { Store } from '../store/store.js';

/**
 * What a failed harness said last, from its log (`.polar/runs/<session>/harness.log`): a harness
 * that exits non-zero often says why only there (a missing binary, a refused credential), and a
 * sample's own error column is empty then. Read from the end only, since a log may run to its cap.
 */
export function readLogTail(file: string, bytes = 16_384): string | null {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return null;
  }
  try {
    const size = fs.fstatSync(fd).size;
    const length = Math.min(size, bytes);
    const buf = Buffer.alloc(length);
    fs.readSync(fd, buf, 0, length, size - length);
    return buf.toString('utf8');
  } catch {
    return null;
  } finally {
    fs.closeSync(fd);
  }
}

const ANSI = /\u001b\[[0-9;?]*[A-Za-z]/g;
/** Lines that say nothing about the cause: polar's own header and cap notes, stack frames, Node's version footer. */
const NOISE = [/^# \d{4}-\d\d-\d\dT/, /^# polar:/, /^at\s/, /^Node\.js v\d/, /^[\s{}()[\]^~|\-=*.,;:'"`]*$/];
const CAUSE = /\b(error|fatal|cannot|can't|could not|not found|no such|denied|refused|failed|failure|exception|panic|abort(ed)?|unauthori[sz]ed|forbidden)\b/i;

/**
 * The last meaningful line(s) of a log: the last line among its final ones that reads like a cause
 * ("Error: Cannot find module …", "bwrap: execvp claude: No such file or directory"), else its last
 * `max` lines that are not noise. Pure.
 */
export function meaningfulTail(text: string, max = 2): string[] {
  const lines = text
    .split(/\r?\n|\r/)
    .map((l) => l.replace(ANSI, '').trim())
    .filter((l) => l !== '' && !NOISE.some((re) => re.test(l)));
  const recent = lines.slice(-30);
  const cause = recent.findLast((l) => CAUSE.test(l));
  return cause !== undefined ? [cause] : recent.slice(-max);
}

/**
 * For a sample that ended without success and without an error of its own (a harness that exited
 * non-zero, say), its session's harness log and what it said last; null otherwise, or when the log
 * is not on this machine (a queued rollout's worker ran it elsewhere).
 */
export function sampleLogTail(store: Store, dbPath: string, sample: SampleRow): { file: string; tail: string[] } | null {
  if (!sample.sessionId || sample.error || !['failed', 'timeout', 'error'].includes(sample.status)) return null;
  const named = store.sessions.get(sample.sessionId)?.metadata.log_file;
  const file = typeof named === 'string' ? named : path.join(localStateDir(dbPath), '.polar', 'runs', sample.sessionId, 'harness.log');
  const text = readLogTail(file);
  if (text === null) return null;
  const tail = meaningfulTail(text);
  return tail.length > 0 ? { file, tail } : null;
}
