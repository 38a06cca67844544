import fs from 'node:fs';
import path from 'node:path';
import type { RolloutTask } from '../task-file.js';

/**
 * What a task is made of, read from its folder, for `applies`: the languages of the workspace the
 * agent gets (environment/, its build context) and of the verifier (tests/). A hint, not a proof:
 * it decides only which forgeries are worth a rollout.
 */
export interface TaskFacts {
  /** Extensions of files under environment/ (".py", ".js", …), and the Dockerfile's mentions. */
  workspace: Set<string>;
  /** The Dockerfile names Python (a python base image, pip). */
  imagePython: boolean;
  /** Test files under environment/ (test.js, test_*.py, tests/…): what `edit-tests` rewrites. */
  testFiles: boolean;
  /** The verifier's text (tests/) mentions python, pytest or node. */
  verifierPython: boolean;
  verifierPytest: boolean;
  verifierNode: boolean;
}

const cache = new Map<string, TaskFacts>();
const MAX_FILES = 5_000;
export const TEST_FILE =
  /(^|\/)(tests?|spec|__tests__)\/|(^|\/)(test|spec)\.[cm]?js$|\.(test|spec)\.[cm]?[jt]s$|(^|\/)test_[^/]*\.py$|_test\.py$|(^|\/)test\.(py|sh)$/;

export function taskFacts(task: RolloutTask): TaskFacts {
  const trial = task.harbor;
  if (!trial) return { workspace: new Set(), imagePython: false, testFiles: false, verifierPython: false, verifierPytest: false, verifierNode: false };
  const known = cache.get(trial.dir);
  if (known) return known;
  const workspace = new Set<string>();
  let testFiles = false;
  const envDir = path.join(trial.dir, 'environment');
  for (const rel of listFiles(envDir)) {
    const ext = path.extname(rel);
    if (ext) workspace.add(ext);
    if (TEST_FILE.test(rel)) testFiles = true;
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
  };
  cache.set(trial.dir, facts);
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
