import fs from 'node:fs/promises';
import path from 'node:path';
import { shellQuote } from '../../core/process/shell.js';
import type { SampleEnvironment, Verification, VerifierCommand, VerifierRun } from './types.js';
import { StageError } from '../stage-error.js';

/**
 * Whose an evaluator's "command not found" is (issue 39). Exit 127 (126: found, not runnable) means
 * a program did not start, and two kinds of program can be missing. The agent's: test.sh runs the
 * program the agent deleted, or a name its workspace was to provide; that scores 0 like any other
 * failure. The machine's: the interpreter the task itself names (`python3 -m unittest`, `node
 * check.cjs`) that this machine's sandbox does not run (a pyenv whose root the sandbox does not
 * show, a toolchain off PATH): no agent could have passed, so a 0 would teach the policy that its
 * right answer was wrong, and `polar tasks check` would call a valid task broken.
 *
 * The rule, for every verifier command of the host environment (a JSONL task's `command` and
 * `tests` evaluators, a Harbor task's test.sh): on a 127 or 126, the names the command starts its
 * simple commands with (not a path, not where the command sets PATH itself), and the well-known
 * interpreters the output says were not found where the task's own files name them too, are looked up again in a fresh sandbox whose working
 * directory is empty: `command -v`, then `NAME --version`. The agent's files are not in it, so
 * nothing it did (deleting a program, a `.python-version` naming a version this machine lacks, a
 * `python3` of its own in the workspace) can make a name missing there. A name missing there, or
 * one that exits 127/126 there, is the machine's: the sample ends `error` with what is missing and
 * the way out. A container's image is the task's own, so there a missing interpreter stays the
 * task's (0, and `broken` in `polar tasks check`).
 */
export function lookingUpInterpreters(environment: SampleEnvironment, scratch: string): SampleEnvironment {
  const place = environment.verification;
  return {
    ...environment,
    verification: {
      ...place,
      async run(cmd) {
        const r = await place.run(cmd);
        try {
          return await machineLacks(place, cmd, r, scratch);
        } catch (err) {
          // Its files are never read: a run with no verdict.
          if (r.rewardDir) await fs.rm(r.rewardDir, { recursive: true, force: true });
          throw err;
        }
      },
    },
  };
}

/** The run as it ended, or StageError('post') where what it lacked is the machine's. */
async function machineLacks(place: Verification, cmd: VerifierCommand, r: VerifierRun, scratch: string): Promise<VerifierRun> {
  if (place.environment !== 'host' || (r.exitCode !== 127 && r.exitCode !== 126) || r.timedOut || r.limit) return r;
  // A name from the output counts only where the task names it too: the output is the agent's code's
  // to write, and "bash: julia: command not found" printed before an exit 127 must not turn its 0
  // into `error` on a machine without julia.
  const said = await namedByTask(notFoundInterpreters(`${r.stdout}\n${r.stderr}`), cmd);
  const names = [...new Set([...commandNames(cmd.command), ...said])];
  if (names.length === 0) return r;
  await fs.mkdir(scratch, { recursive: true, mode: 0o700 });
  const empty = await fs.mkdtemp(path.join(scratch, 'lookup-'));
  try {
    const probe = await place.run({
      command: lookupScript(names),
      what: 'the interpreter lookup',
      workspace: empty,
      env: cmd.env,
      timeoutMs: 30_000,
      readOnly: [],
      rewardDir: false,
      network: 'none',
    });
    // A lookup that could not run says nothing either way: the evaluator's verdict stands.
    if (probe.exitCode !== 0 || probe.timedOut) return r;
    const missing = probe.stdout.split('\n').filter((l) => l.trim() !== '');
    if (missing.length === 0) return r;
    throw new StageError(
      'post',
      `${cmd.what} exited ${r.exitCode}: this machine's sandbox cannot run ${missing.join('; ')}. ` +
        'Not the agent: no workspace could have passed. Show its toolchain to the sandbox (--sandbox-ro PATH_TO_TOOLCHAIN) or put it on PATH',
    );
  } finally {
    await fs.rm(empty, { recursive: true, force: true });
  }
}

/** Bounds on reading the task's own files for a name (its tests/, the task file's folder). */
const TASK_FILES_MAX = 2000;
const TASK_FILE_BYTES = 1024 * 1024;

/**
 * The names among `names` that the task itself mentions: in the verifier's command, or in a file of
 * the folders shown to it read-only (a Harbor task's tests/, a JSONL task file's folder), which the
 * agent never had. test.sh running `python3 check.py` names python3 there; the agent's output alone
 * names nothing.
 */
export async function namedByTask(names: readonly string[], cmd: Pick<VerifierCommand, 'command' | 'readOnly'>): Promise<string[]> {
  if (names.length === 0) return [];
  const left = new Set(names);
  const found: string[] = [];
  const look = (text: string) => {
    for (const n of left) {
      if (new RegExp(`(^|[^\\w.+-])${n.replace(/[.+]/g, '\\$&')}($|[^\\w.+-])`, 'm').test(text)) {
        found.push(n);
        left.delete(n);
      }
    }
  };
  look(cmd.command);
  let seen = 0;
  const walk = async (dir: string): Promise<void> => {
    for (const e of await fs.readdir(dir, { withFileTypes: true }).catch(() => [])) {
      if (left.size === 0 || ++seen > TASK_FILES_MAX) return;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile()) {
        const st = await fs.stat(p).catch(() => null);
        if (st && st.size <= TASK_FILE_BYTES) look(await fs.readFile(p, 'utf8').catch(() => ''));
      }
    }
  };
  for (const m of cmd.readOnly) if (left.size > 0) await walk(m.source);
  return found;
}

/**
 * One line per name this sandbox cannot run, from an empty folder: not on PATH, or a file there
 * that exits 127 or 126 when asked its version (a shim whose manager is not shown; a script whose
 * interpreter is missing), with the first line it said.
 */
function lookupScript(names: readonly string[]): string {
  return [
    `for n in ${names.map(shellQuote).join(' ')}; do`,
    '  p=$(command -v -- "$n") || { echo "$n (not found on PATH: $PATH)"; continue; }',
    '  case $p in /*) ;; *) continue ;; esac',
    '  said=$("$n" --version </dev/null 2>&1 >/dev/null); rc=$?',
    '  if [ $rc -eq 127 ] || [ $rc -eq 126 ]; then echo "$n ($p exits $rc: $(printf %s "$said" | head -n 1))"; fi',
    'done',
    'exit 0',
  ].join('\n');
}

/** Words that are the shell's own, never a program to look up. */
const SHELL_WORDS = new Set(
  'if then else elif fi for while until do done case esac in function select time ! { } [ [[ ]] test cd echo printf true false : export set unset source . exit return read local eval shift trap wait ulimit umask pwd type alias'.split(
    ' ',
  ),
);

/** Programs that run a command named after them: the command's program is the word after their own options. */
const WRAPPERS = new Set(['exec', 'command', 'env', 'nice', 'nohup', 'timeout', 'stdbuf', 'xvfb-run']);

/**
 * The programs a shell command names first in each of its simple commands (`cd sub && python3 -m
 * pytest | tee log` -> python3, tee), past assignments and wrappers (`timeout 60 node x.js` -> node),
 * bare names only: a path is the task's or the agent's file, and a word the shell expands is not
 * known until it runs. None where the command sets PATH: a name may then be the workspace's own.
 */
export function commandNames(command: string): string[] {
  if (/(^|[\s;&|(])(export\s+)?PATH\+?=/.test(command)) return [];
  const names: string[] = [];
  for (const words of simpleCommands(command)) {
    let i = 0;
    while (i < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]!.text)) i++;
    while (i < words.length && WRAPPERS.has(words[i]!.text)) {
      i++;
      // The wrapper's options and assignments, and timeout's duration.
      while (i < words.length && (/^-/.test(words[i]!.text) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]!.text) || /^\d+(\.\d+)?[smhd]?$/.test(words[i]!.text)))
        i++;
    }
    const first = words[i];
    if (!first || first.expands || !/^[A-Za-z0-9_][A-Za-z0-9_.+-]*$/.test(first.text) || SHELL_WORDS.has(first.text)) continue;
    names.push(first.text);
  }
  return [...new Set(names)];
}

interface Word {
  text: string;
  quoted: boolean;
  /** Holds something the shell expands ($, `): not known before it runs. */
  expands: boolean;
}

/** The command's words, split into simple commands at unquoted ; & | ( ) and newlines. */
function simpleCommands(command: string): Word[][] {
  const out: Word[][] = [];
  let words: Word[] = [];
  let word: Word = { text: '', quoted: false, expands: false };
  let quote: '"' | "'" | null = null;
  const endWord = () => {
    if (word.text !== '' || word.quoted || word.expands) words.push(word);
    word = { text: '', quoted: false, expands: false };
  };
  const endCommand = () => {
    endWord();
    if (words.length > 0) out.push(words);
    words = [];
  };
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (quote === "'") {
      if (c === "'") quote = null;
      else word.text += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === '\\' && i + 1 < command.length) word.text += command[++i];
      else {
        if (c === '$' || c === '`') word.expands = true;
        word.text += c;
      }
    } else if (c === "'" || c === '"') {
      quote = c;
      word.quoted = true;
    } else if (c === '\\' && i + 1 < command.length) word.text += command[++i];
    else if (c === '$' && command[i + 1] === '(') {
      // A command substitution is part of the word it sits in: skipped whole, the word unknown until it runs.
      word.expands = true;
      let depth = 0;
      for (i++; i < command.length; i++) {
        if (command[i] === '(') depth++;
        else if (command[i] === ')' && --depth === 0) break;
      }
    } else if (c === ' ' || c === '\t') endWord();
    else if (';&|()\n'.includes(c)) endCommand();
    else {
      if (c === '$' || c === '`') word.expands = true;
      word.text += c;
    }
  }
  endCommand();
  return out;
}

/** Interpreters and build tools no task's workspace provides: when output says one was not found, it is looked up. */
const INTERPRETER =
  /^(python[\d.]*|pip[\d.]*|pytest|py\.test|uv|poetry|tox|conda|node|nodejs|npm|npx|yarn|pnpm|deno|bun|tsx|ts-node|ruby|gem|bundle|rake|rspec|perl|php|java|javac|mvn|gradle|go|cargo|rustc|gcc|g\+\+|cc|clang|make|cmake|bash|sh|zsh|dotnet|Rscript|julia|lua)$/;

/**
 * The well-known interpreters a command's output says could not be found, in the forms the shells
 * and shims say it: bash's `NAME: command not found` (also pyenv's `pyenv: NAME: command not found`),
 * dash's `sh: 1: NAME: not found`, env's `env: 'NAME': No such file or directory` (a `#!/usr/bin/env
 * NAME` script), and a shim that could not start what it runs (`/opt/pyenv/shims/python3: line 12:
 * /opt/pyenv/libexec/pyenv: No such file or directory`: the shim's own name).
 */
export function notFoundInterpreters(output: string): string[] {
  const names: string[] = [];
  for (const line of output.split('\n')) {
    const l = line.trim();
    const m =
      /(?:^|: )([^\s:/]+): command not found$/.exec(l) ??
      /^\S*sh: \d+: ([^\s:/]+): not found$/.exec(l) ??
      /\benv: ['‘"]?([^\s'’"]+?)['’"]?: No such file or directory$/.exec(l) ??
      /^\/\S*\/([^\s/:]+): (?:line \d+: )?\/\S+: (?:No such file or directory|cannot execute.*|bad interpreter.*)$/.exec(l);
    if (m && INTERPRETER.test(m[1]!)) names.push(m[1]!);
  }
  return [...new Set(names)];
}
