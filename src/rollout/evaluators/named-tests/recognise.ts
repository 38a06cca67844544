import type { RunnerName } from '../../task-file.js';

/** A task's test command that polar can run itself as a named-test runner. */
export interface RecognisedCommand {
  runner: RunnerName;
  ids: string[];
}

/**
 * A command-style `tests` entry (`python3 -m unittest -q test_x.C.test_a`, `pytest tests/test_x.py::t`,
 * `node --test test.js`) as the runner and the test ids it names, so task files written before
 * named tests existed are graded the same way: by the report polar's runner writes, with polar's
 * configuration. null for anything else: a command with shell syntax, options polar does not know
 * the meaning of, or no test named (`python3 -m unittest` discovers, `npm test` runs a script the
 * workspace defines). Those keep exit-status grading, which `polar tasks check` tries to forge.
 */
export function recogniseCommand(command: string): RecognisedCommand | null {
  const words = shellWords(command);
  if (!words || words.length === 0) return null;
  const [head, ...rest] = words;
  if (/^python3?(\.\d+)?$/.test(head!) && rest[0] === '-m' && rest[1] === 'unittest') return named('unittest', rest.slice(2), UNITTEST_FLAGS, unittestId);
  if (/^python3?(\.\d+)?$/.test(head!) && rest[0] === '-m' && rest[1] === 'pytest') return named('pytest', rest.slice(2), PYTEST_FLAGS, (w) => w);
  if (head === 'pytest') return named('pytest', rest, PYTEST_FLAGS, (w) => w);
  if (head === 'node' && rest[0] === '--test') return named('node-test', rest.slice(1), new Set<string>(), (w) => w);
  return null;
}

/** Flags that change only how much the runner prints, never which tests run or how they pass. */
const UNITTEST_FLAGS = new Set(['-q', '--quiet', '-v', '--verbose', '-b', '--buffer']);
const PYTEST_FLAGS = new Set(['-q', '--quiet', '-v', '--verbose', '-s', '-rA', '-ra', '--tb=short', '--tb=line', '--tb=no', '--no-header']);

function named(runner: RunnerName, args: string[], flags: ReadonlySet<string>, id: (w: string) => string | null): RecognisedCommand | null {
  const ids: string[] = [];
  for (const a of args) {
    if (a.startsWith('-')) {
      if (!flags.has(a)) return null;
      continue;
    }
    const converted = id(a);
    if (converted === null) return null;
    ids.push(converted);
  }
  return ids.length > 0 ? { runner, ids } : null;
}

/** unittest takes dotted names, and (3.5+) a path to a test file, which it turns into one: `tests/test_x.py` is `tests.test_x`. */
function unittestId(w: string): string | null {
  if (!w.endsWith('.py')) return /^[A-Za-z_][\w.]*$/.test(w) ? w : null;
  const parts = w.replace(/^\.\//, '').slice(0, -3).split('/');
  return parts.every((p) => /^[A-Za-z_]\w*$/.test(p)) ? parts.join('.') : null;
}

/** Words of a plain command: whitespace-separated, '…' and "…" quoting; null when it uses any other shell syntax. */
export function shellWords(command: string): string[] | null {
  const words: string[] = [];
  let cur = '';
  let has = false;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (c === "'" || c === '"') {
      const end = command.indexOf(c, i + 1);
      if (end < 0) return null;
      const inner = command.slice(i + 1, end);
      if (c === '"' && /[$`\\]/.test(inner)) return null;
      cur += inner;
      has = true;
      i = end;
    } else if (/\s/.test(c)) {
      if (has) words.push(cur);
      cur = '';
      has = false;
    } else if (/[;&|<>()$`\\*?[\]{}~#!]/.test(c)) {
      return null;
    } else {
      cur += c;
      has = true;
    }
  }
  if (has) words.push(cur);
  return words;
}
