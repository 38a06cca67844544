import fs from 'node:fs';
import path from 'node:path';
import type { RolloutTask } from '../task-file.js';

/**
 * What a task is made of, read from its folder, for `applies`: the languages of the workspace the
 * agent gets (environment/, its build context) and of the verifier (tests/). A hint, not a proof:
 * it decides only which forgeries are worth a rollout.
 */
export interface TaskFacts {
  /** Extensions of files under environment/ (".py", ".js", …), or a JSONL task's workspace; "package.json" where one is there. */
  workspace: Set<string>;
  /** The Dockerfile names Python (a python base image, pip). */
  imagePython: boolean;
  /** Test files under environment/ (test.js, test_*.py, tests/…): what `edit-tests` rewrites. */
  testFiles: boolean;
  /** The verifier's text (tests/) mentions python, pytest or node. */
  verifierPython: boolean;
  verifierPytest: boolean;
  verifierNode: boolean;
  /** The verifier runs `python -m unittest` (where a workspace unittest.py shadows it). */
  verifierUnittest: boolean;
  /** The verifier runs an npm-style script runner (npm/yarn/pnpm test or run): package.json decides what runs. */
  verifierNpm: boolean;
  /** What grades it: a `command` evaluator's output, a `tests` evaluator's exit statuses, Harbor's reward files, or nothing the agent's code touches. */
  grader: 'command' | 'tests' | 'harbor' | 'none';
}

const cache = new Map<string, TaskFacts>();
const MAX_FILES = 5_000;
export const TEST_FILE =
  /(^|\/)(tests?|spec|__tests__)\/|(^|\/)(test|spec)\.[cm]?js$|\.(test|spec)\.[cm]?[jt]s$|(^|\/)test_[^/]*\.py$|_test\.py$|(^|\/)test\.(py|sh)$/;

const UNITTEST = /python[\d.]*\s+(-\S+\s+)*-m\s*unittest\b/;
const NPM = /\b(npm|pnpm|yarn)\s+(test|t|run|run-script)\b|\bnpx\b/;

export function taskFacts(task: RolloutTask): TaskFacts {
  const trial = task.harbor;
  if (!trial) return jsonlFacts(task);
  const known = cache.get(trial.dir);
  if (known) return known;
  const workspace = new Set<string>();
  let testFiles = false;
  const envDir = path.join(trial.dir, 'environment');
  for (const rel of listFiles(envDir)) {
    const ext = path.extname(rel);
    if (ext) workspace.add(ext);
    if (TEST_FILE.test(rel)) testFiles = true;
    if (path.basename(rel) === 'package.json') workspace.add('package.json');
  }
  // The image's interpreters (not its files: a RUN step may make modules the folder lacks, which a
  // container would have and this misses; the module forgeries then are not tried).
  const dockerfile = readText(path.join(envDir, 'Dockerfile'));
  const tests = listFiles(trial.testsDir)
    .map((rel) => readText(path.join(trial.testsDir, rel)).slice(0, 100_000))
    .join('\n');
  const facts = {
    workspace,
    imagePython: /python|pip\b/i.test(dockerfile),
    testFiles,
    verifierPython: /python|pytest|\.py\b/.test(tests),
    verifierPytest: /pytest/.test(tests),
    verifierNode: /\bnode\b|\.[cm]?js\b|npm|npx/.test(tests),
    verifierUnittest: UNITTEST.test(tests),
    verifierNpm: NPM.test(tests),
    grader: 'harbor' as const,
  };
  cache.set(trial.dir, facts);
  return facts;
}

/**
 * A JSONL task's facts: its workspace folder's files (a git source is not listed: its languages are
 * read from the commands instead), and the verifier's text, which is what the evaluator runs (its
 * command, its tests' commands) and the hidden checkers those name under $POLAR_TASKS_DIR.
 */
function jsonlFacts(task: RolloutTask): TaskFacts {
  const key = `jsonl:${task.id}:${JSON.stringify(task.workspace)}:${JSON.stringify(task.evaluator)}`;
  const known = cache.get(key);
  if (known) return known;
  const ev = task.evaluator;
  const commands = ev.type === 'command' ? [ev.command] : ev.type === 'tests' ? [...ev.fail_to_pass, ...ev.pass_to_pass] : [];
  // A `tests` evaluator's named runner (its ids are no commands): what polar runs for it.
  const runner = ev.type === 'tests' ? (ev as { runner?: unknown }).runner : undefined;
  const runs = runner === 'pytest' ? 'python3 -m pytest' : runner === 'unittest' ? 'python3 -m unittest' : runner === 'node-test' ? 'node --test' : '';
  const text = [...commands, runs, ...task.setup].join('\n');
  const workspace = new Set<string>();
  let testFiles = false;
  const listed = 'dir' in task.workspace ? listFiles(task.workspace.dir) : [];
  for (const rel of listed) {
    const ext = path.extname(rel);
    if (ext) workspace.add(ext);
    if (TEST_FILE.test(rel)) testFiles = true;
  }
  if ('git' in task.workspace) {
    // Not listed (a bundle or a remote): what the commands run says what the workspace holds.
    if (/python|pytest|\.py\b/.test(text)) workspace.add('.py');
    if (/\bnode\b|\.[cm]?js\b|npm|npx/.test(text)) workspace.add('.js');
    testFiles = /\btests?\b|test_|_test\b|\.test\./.test(text);
  }
  if (listed.includes('package.json')) workspace.add('package.json');
  const facts: TaskFacts = {
    workspace,
    imagePython: false,
    testFiles,
    verifierPython: /python|pytest|\.py\b/.test(text),
    verifierPytest: /pytest/.test(text),
    verifierNode: /\bnode\b|\.[cm]?js\b|npm|npx/.test(text),
    verifierUnittest: UNITTEST.test(text),
    verifierNpm: NPM.test(text),
    grader: ev.type === 'session-completed' ? 'none' : ev.type,
  };
  cache.set(key, facts);
  return facts;
}

/** The workspace holds code a checker may load: Python, JavaScript, or shell scripts it may run. */
export function hasModules(task: RolloutTask, kinds: readonly ('py' | 'js' | 'sh')[] = ['py', 'js', 'sh']): boolean {
  const ws = taskFacts(task).workspace;
  return kinds.some((k) => (k === 'js' ? ['.js', '.cjs', '.mjs'].some((e) => ws.has(e)) : ws.has(`.${k}`)));
}

/** Python anywhere the verifier may start it: the workspace's modules or the verifier's own text. */
export function usesPython(task: RolloutTask): boolean {
  const f = taskFacts(task);
  return f.workspace.has('.py') || f.verifierPython || f.imagePython;
}

function listFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (out.length >= MAX_FILES) return;
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (e.name !== '.git' && e.name !== 'node_modules') walk(path.join(dir, e.name), r);
      } else out.push(r);
    }
  };
  walk(root, '');
  return out;
}

function readText(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** A JSONL task (polar's own format), not a Harbor task folder. */
export function isJsonl(task: RolloutTask): boolean {
  return task.harbor === undefined;
}

/** Something grades it that the agent's files can reach: a Harbor verifier, a `command` or `tests` evaluator (not session-completed). */
export function graded(task: RolloutTask): boolean {
  return taskFacts(task).grader !== 'none';
}
