import fs from 'node:fs';
import path from 'node:path';
import { isRecord } from '../core/chat.js';
import { PolarError } from '../core/errors.js';
import type { HarborTrial } from './harbor/types.js';
import { isDir } from '../core/fs-kind.js';
import { gitSourceProblem } from './git-source.js';

/** The test runners a `tests` evaluator names (evaluators/named-tests/ reads each one's report). */
export const RUNNER_NAMES = ['pytest', 'unittest', 'node-test'] as const;
export type RunnerName = (typeof RUNNER_NAMES)[number];

/**
 * The rollout task file: JSONL, one task per line (blank lines and lines starting with `#` are
 * skipped). Every problem is reported with its line and field, all of them at once, before anything
 * starts. Relative workspace paths are resolved against the task file's folder.
 *
 * {"id", "prompt",
 *  "workspace": {"dir": PATH} | {"git": URL_OR_PATH, "commit": SHA} | {"empty": true},
 *  "setup": [commands run in the workspace at INIT],
 *  "evaluator": {"type": "command", "command": CMD, "timeout": S,
 *                "report": {"format": "junit", "tests": [TEST_ID…]} (graded by the JUnit XML CMD writes to $POLAR_REPORT_DIR/report.xml)}
 *             | {"type": "tests", "fail_to_pass": [CMD…], "pass_to_pass": [CMD…], "timeout": S,
 *                "test_files": [PATH_OR_GLOB…] (reset to the task's version before the tests run)}
 *             | {"type": "tests", "runner": "pytest" | "unittest" | "node-test", "runner_args": [ARG…],
 *                "fail_to_pass": [TEST_ID…], "pass_to_pass": [TEST_ID…], "timeout": S, "test_files": […]}
 *             | {"type": "session-completed"},
 *  "timeout": S, "metadata": {…},
 *  "network": "host" (the harness gets the machine's network instead of the proxy alone),
 *  "setup_network": "host" | "none" (the setup commands' network; default host),
 *  "solution": [commands run in the workspace by the built-in `oracle`, as Harbor's solution/solve.sh]}
 */
export type TaskWorkspace = { dir: string } | { git: string; commit: string } | { empty: true };

export type TaskEvaluator =
  | {
      type: 'command';
      command: string;
      timeout: number;
      /**
       * Grade by named tests: the command writes a JUnit XML report to $POLAR_REPORT_DIR/report.xml
       * and the reward is 1 only if every test named here ran and passed (evaluators/named-tests/);
       * its exit status and output count for nothing. Absent: the reward is its output or exit status.
       */
      report?: { format: 'junit'; tests: string[] };
    }
  | {
      type: 'tests';
      fail_to_pass: string[];
      pass_to_pass: string[];
      timeout: number;
      /** Paths or globs reset to the task's version before the tests run (evaluators/test-files.ts); absent: the usual places. */
      test_files?: string[];
      /**
       * A runner polar drives (evaluators/named-tests/): fail_to_pass and pass_to_pass are then test
       * ids, graded by the runner's report; absent: they are commands (plain runner invocations are
       * still graded by the tests they name).
       */
      runner?: RunnerName;
      /** Extra arguments for the runner from the task (pytest's `-p asyncio`), never from the workspace. */
      runner_args?: string[];
    }
  | { type: 'session-completed' }
  /** A Harbor task's tests/test.sh, run after the agent with its reward files read (rollout/harbor/). */
  | { type: 'harbor'; timeout: number };

export interface RolloutTask {
  id: string;
  prompt: string;
  workspace: TaskWorkspace;
  setup: string[];
  evaluator: TaskEvaluator;
  /**
   * The agent's budget in seconds, from the agent's start (as Harbor's agent.timeout_sec); a JSONL
   * task's setup commands get as much again, on their own clock (stages.ts preparationMs). null: the
   * rollout's --timeout.
   */
  timeout: number | null;
  metadata: Record<string, unknown>;
  /** `host`: the harness gets the machine's network, not only the capture proxy (absent: the rollout's choice). */
  network?: 'host';
  /** The setup commands' network (absent: host). */
  setup_network?: 'host' | 'none';
  /**
   * A known-good solution: shell commands the built-in `oracle` runs in the workspace in the
   * agent's place (Harbor's solution/solve.sh for JSONL tasks), so `polar tasks check` can confirm
   * the task's top reward is reachable. Never shown to a model's agent.
   */
  solution?: string[];
  /** A Harbor task folder's trial (read by rollout/harbor/load.ts; absent for JSONL tasks). */
  harbor?: HarborTrial;
}

/** An evaluator's own time limit when the task gives none (seconds). */
export const DEFAULT_EVALUATOR_TIMEOUT = 300;

const TASK_KEYS = new Set(['id', 'prompt', 'workspace', 'setup', 'evaluator', 'timeout', 'metadata', 'network', 'setup_network', 'solution']);
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function readTaskFile(file: string): RolloutTask[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new PolarError('POLAR_USAGE', `cannot read the task file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, undefined, {
      cause: err,
    });
  }
  return parseTaskFile(text, { name: file, baseDir: path.dirname(path.resolve(file)), checkPaths: true });
}

/**
 * Parses and validates a task file's text. With `checkPaths`, a `dir` workspace must be a folder
 * and a local `git` source must be something git can clone (each source asked once).
 */
export function parseTaskFile(text: string, options: { name: string; baseDir: string; checkPaths?: boolean }): RolloutTask[] {
  const checks: PathChecks = { ...options, ...(options.checkPaths ? { gitSources: new Map() } : {}) };
  const problems: string[] = [];
  const tasks: RolloutTask[] = [];
  const seen = new Map<string, number>();
  text.split('\n').forEach((raw, index) => {
    const line = index + 1;
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    const at: At = (field, what) => {
      problems.push(`${options.name} line ${line}${field ? `, field "${field}"` : ''}: ${what}`);
    };
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch (err) {
      at(null, `not valid JSON (${(err as Error).message})`);
      return;
    }
    const task = validateTask(value, at, () => problems.length, checks);
    if (!task) return;
    const first = seen.get(task.id);
    if (first !== undefined) at('id', `duplicate id ${JSON.stringify(task.id)} (first on line ${first})`);
    else seen.set(task.id, line);
    tasks.push(task);
  });
  if (problems.length > 0) {
    const shown = problems.slice(0, 20);
    if (problems.length > shown.length) shown.push(`… and ${problems.length - shown.length} more`);
    throw new PolarError(
      'POLAR_USAGE',
      `the task file has ${problems.length} problem${problems.length === 1 ? '' : 's'}; nothing was started:\n  ${shown.join('\n  ')}`,
    );
  }
  if (tasks.length === 0) throw new PolarError('POLAR_USAGE', `${options.name} holds no tasks (one JSON object per line)`);
  return tasks;
}

/** One task object (a NeMo Gym row's `task`), validated as a task-file line would be. */
export function validateTaskObject(value: unknown, options: { name: string; baseDir: string; checkPaths?: boolean }): RolloutTask {
  const problems: string[] = [];
  const at: At = (field, what) => {
    problems.push(`${options.name}${field ? `, field "${field}"` : ''}: ${what}`);
  };
  const task = validateTask(value, at, () => problems.length, options);
  if (!task || problems.length > 0) throw new PolarError('POLAR_BAD_REQUEST', problems.join('; ') || `${options.name}: not a task`, 400);
  return task;
}

type At = (field: string | null, what: string) => void;

interface PathChecks {
  baseDir: string;
  checkPaths?: boolean;
  /**
   * Local git sources asked so far, with git's reason it cannot clone one (null: it can). Only a
   * task file's are asked: a task in a row from the network (validateTaskObject) has git run on no path it names.
   */
  gitSources?: Map<string, string | null>;
}

function validateTask(value: unknown, at: At, problems: () => number, options: PathChecks): RolloutTask | null {
  if (!isRecord(value)) {
    at(null, 'a task is a JSON object');
    return null;
  }
  const before = problems();
  for (const key of Object.keys(value)) if (!TASK_KEYS.has(key)) at(key, `unknown field; a task has ${[...TASK_KEYS].join(', ')}`);
  const id = value.id;
  if (typeof id !== 'string' || !ID.test(id)) at('id', 'required: letters, digits, . _ - (up to 128), starting with a letter or digit');
  if (typeof value.prompt !== 'string' || value.prompt.trim() === '') at('prompt', 'required: the task as the agent is given it (a non-empty string)');
  const workspace = validateWorkspace(value.workspace, at, options, typeof id === 'string' ? id : null);
  const setup = value.setup ?? [];
  if (!Array.isArray(setup) || setup.some((c) => typeof c !== 'string')) at('setup', 'a list of shell commands (strings)');
  const evaluator = validateEvaluator(value.evaluator, at);
  const timeout = value.timeout ?? null;
  if (timeout !== null && !positive(timeout)) at('timeout', 'seconds, a positive number');
  if (value.metadata !== undefined && !isRecord(value.metadata)) at('metadata', 'an object');
  if (value.network !== undefined && value.network !== 'host' && value.network !== 'proxy-only')
    at('network', '"host" (the machine\'s network) or "proxy-only" (the default: the capture proxy alone)');
  if (value.setup_network !== undefined && value.setup_network !== 'host' && value.setup_network !== 'none')
    at('setup_network', '"host" (the default) or "none"');
  const solution = value.solution;
  if (solution !== undefined && (!Array.isArray(solution) || solution.length === 0 || solution.some((c) => typeof c !== 'string')))
    at('solution', "a non-empty list of shell commands (strings), run by the built-in oracle in the agent's place");
  if (problems() > before || !workspace || !evaluator) return null;
  return {
    id: id as string,
    prompt: value.prompt as string,
    workspace,
    setup: setup as string[],
    evaluator,
    timeout: timeout as number | null,
    metadata: (value.metadata as Record<string, unknown> | undefined) ?? {},
    ...(value.network === 'host' ? { network: 'host' as const } : {}),
    ...(value.setup_network === 'host' || value.setup_network === 'none' ? { setup_network: value.setup_network } : {}),
    ...(Array.isArray(solution) ? { solution: solution as string[] } : {}),
  };
}

function validateWorkspace(value: unknown, at: At, options: PathChecks, id: string | null): TaskWorkspace | null {
  const usage = 'required: {"dir": PATH}, {"git": URL_OR_PATH, "commit": SHA} or {"empty": true}';
  if (!isRecord(value)) {
    at('workspace', usage);
    return null;
  }
  if (value.empty === true && Object.keys(value).length === 1) return { empty: true };
  if (typeof value.dir === 'string' && Object.keys(value).length === 1) {
    const dir = path.resolve(options.baseDir, value.dir);
    if (options.checkPaths && !isDir(dir)) {
      at('workspace.dir', `no such folder: ${dir}`);
      return null;
    }
    return { dir };
  }
  if (typeof value.git === 'string' && Object.keys(value).every((k) => k === 'git' || k === 'commit')) {
    if (typeof value.commit !== 'string' || !/^[0-9a-f]{7,64}$/i.test(value.commit)) {
      at('workspace.commit', 'required with "git": the commit to check out (a hex SHA)');
      return null;
    }
    const local = !/^[a-z][a-z0-9+.-]*:\/\//i.test(value.git) && !/^[^/]+@[^:]+:/.test(value.git);
    const git = local ? path.resolve(options.baseDir, value.git) : value.git;
    if (local && options.checkPaths && !fs.existsSync(git)) {
      at('workspace.git', `no such repository: ${git}`);
      return null;
    }
    const sources = options.gitSources;
    if (local && sources) {
      if (!sources.has(git)) sources.set(git, gitSourceProblem(git));
      const problem = sources.get(git);
      if (problem) {
        at('workspace.git', `${id ? `task ${id}: ` : ''}git cannot clone ${git}: ${problem}`);
        return null;
      }
    }
    return { git, commit: value.commit };
  }
  at('workspace', usage);
  return null;
}

function validateEvaluator(value: unknown, at: At): TaskEvaluator | null {
  if (!isRecord(value) || typeof value.type !== 'string') {
    at('evaluator', 'required: {"type": "command" | "tests" | "session-completed", …}');
    return null;
  }
  const timeout = value.timeout ?? DEFAULT_EVALUATOR_TIMEOUT;
  if (!positive(timeout)) at('evaluator.timeout', 'seconds, a positive number');
  switch (value.type) {
    case 'command': {
      if (typeof value.command !== 'string' || value.command.trim() === '') {
        at('evaluator.command', 'required: the shell command that scores the workspace');
        return null;
      }
      const report = value.report;
      const reportOk =
        report === undefined ||
        (isRecord(report) &&
          report.format === 'junit' &&
          Array.isArray(report.tests) &&
          report.tests.length > 0 &&
          report.tests.every((t) => typeof t === 'string' && t !== ''));
      if (!reportOk)
        at(
          'evaluator.report',
          '{"format": "junit", "tests": [TEST_ID…]}: the tests that must pass in the JUnit XML the command writes to $POLAR_REPORT_DIR/report.xml',
        );
      return positive(timeout) && reportOk
        ? {
            type: 'command',
            command: value.command,
            timeout: timeout as number,
            ...(report !== undefined ? { report: { format: 'junit' as const, tests: (report as { tests: string[] }).tests } } : {}),
          }
        : null;
    }
    case 'tests': {
      const lists = ['fail_to_pass', 'pass_to_pass'] as const;
      for (const key of lists) {
        const list = value[key] ?? [];
        if (!Array.isArray(list) || list.some((c) => typeof c !== 'string'))
          at(`evaluator.${key}`, 'a list of shell commands, or of test ids with "runner" (strings)');
      }
      const f2p = (value.fail_to_pass ?? []) as string[];
      const p2p = (value.pass_to_pass ?? []) as string[];
      if (Array.isArray(f2p) && Array.isArray(p2p) && f2p.length + p2p.length === 0)
        at('evaluator', 'a tests evaluator needs at least one fail_to_pass or pass_to_pass command');
      const files = value.test_files;
      const filesOk =
        files === undefined ||
        (Array.isArray(files) && files.every((f) => typeof f === 'string' && f.trim() !== '' && !f.startsWith('/') && !f.split('/').includes('..')));
      if (!filesOk) at('evaluator.test_files', 'a list of workspace-relative paths or globs (no leading / or ..); [] resets none');
      const runner = value.runner;
      const runnerOk = runner === undefined || (RUNNER_NAMES as readonly unknown[]).includes(runner);
      if (!runnerOk) at('evaluator.runner', `one of ${RUNNER_NAMES.join(', ')}; absent: fail_to_pass and pass_to_pass are commands`);
      const args = value.runner_args;
      const argsOk = args === undefined || (runner !== undefined && Array.isArray(args) && args.every((a) => typeof a === 'string' && a !== '--'));
      if (!argsOk) at('evaluator.runner_args', 'a list of arguments for the runner (strings), with "runner" set');
      return positive(timeout) && Array.isArray(f2p) && Array.isArray(p2p) && filesOk && runnerOk && argsOk
        ? {
            type: 'tests',
            fail_to_pass: f2p,
            pass_to_pass: p2p,
            timeout: timeout as number,
            ...(files !== undefined ? { test_files: files as string[] } : {}),
            ...(runner !== undefined ? { runner: runner as RunnerName } : {}),
            ...(args !== undefined ? { runner_args: args as string[] } : {}),
          }
        : null;
    }
    case 'session-completed':
      return { type: 'session-completed' };
    default:
      at('evaluator.type', `unknown evaluator ${JSON.stringify(value.type)}; use command, tests or session-completed`);
      return null;
  }
}

function positive(v: unknown): boolean {
  return typeof v === 'number' && Number.isFinite(v) && v > 0;
}
