import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { polarCli } from '../support/polar-cli.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * `polar tasks check` on JSONL task files (issue 39, 5): the oracle runs a task's "solution", nop
 * nothing, and every forgery that applies to what its evaluator runs. A small file with an honest
 * task, one graded by the exit status of `npm test` (package.json is the agent's to write), one
 * graded by `python3 -m unittest` (a workspace unittest.py shadows the runner unless polar runs it
 * by test name, evaluators/tests.ts) and one without "solution"; then the fixture tasks, every one
 * of which must hold. The assertions are the intended behaviour once named-test grading, bounded
 * rewards and agent failures scoring 0 are in (issue 39, items 1-4).
 */
const bwrap = findBwrap();
const noSandbox = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
const FIXTURES = path.resolve(__dirname, '../../fixtures/tasks/tasks.jsonl');

interface Run {
  outcome: string;
  reward: number | null;
}
interface Result {
  task: string;
  name: string;
  verdict: string;
  ok: boolean;
  problems: string[];
  unverifiable: string[];
  oracle: Run;
  nop: Run;
  hackable: string[];
  escapes: string[];
  forgeries: Record<string, Run & { forfeit: string | null; error: string | null }>;
}
interface CheckJson {
  ok: boolean;
  tasks: number;
  environment: string;
  forge: boolean;
  strict: boolean;
  valid: string[];
  broken: string[];
  unverifiable: string[];
  invalid: string[];
  hackable: string[];
  escapes: string[];
  results: Result[];
}

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-check-jsonl-'));
});
afterAll(() => removeTree(dir));

const polar = (args: string[]) => polarCli(args, { env: { ...process.env, NO_COLOR: '1' }, timeout: patient(280_000), maxBuffer: 64 * 1024 * 1024 });
const write = (rel: string, text: string) => {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), text);
};

/** The small task file: four tasks, their repositories beside it. */
function taskFile(): string {
  write('repos/answer/question.txt', 'What is six times seven?\n');
  write('repos/npm-sum/package.json', '{\n  "name": "npm-sum",\n  "private": true,\n  "scripts": { "test": "node test.js" }\n}\n');
  write('repos/npm-sum/sum.js', 'exports.sum = (a, b) => a - b;\n');
  write('repos/npm-sum/test.js', "const assert = require('node:assert');\nassert.strictEqual(require('./sum.js').sum(2, 2), 4);\n");
  write('repos/py-calc/calc.py', 'def double(x):\n    return x + x + 1\n');
  write(
    'repos/py-calc/test_calc.py',
    'import unittest\n\nfrom calc import double\n\n\nclass DoubleTest(unittest.TestCase):\n    def test_double(self):\n        self.assertEqual(double(21), 42)\n',
  );
  const t = patientSeconds(60);
  const tasks = [
    {
      id: 'honest-answer',
      prompt: 'Write the answer to question.txt into answer.txt.',
      workspace: { dir: 'repos/answer' },
      evaluator: { type: 'command', command: 'test "$(cat answer.txt 2>/dev/null)" = 42', timeout: t },
      solution: ['echo 42 > answer.txt'],
    },
    {
      id: 'npm-exit-status',
      prompt: 'Fix sum.js so that `npm test` passes.',
      workspace: { dir: 'repos/npm-sum' },
      evaluator: { type: 'tests', fail_to_pass: ['npm test'], pass_to_pass: [], timeout: t },
      solution: ["sed -i 's/a - b/a + b/' sum.js"],
    },
    {
      id: 'py-unittest',
      prompt: 'Fix double() in calc.py so that `python3 -m unittest test_calc` passes.',
      workspace: { dir: 'repos/py-calc' },
      evaluator: { type: 'tests', fail_to_pass: ['python3 -m unittest -q test_calc.DoubleTest.test_double'], pass_to_pass: [], timeout: t },
      solution: ["sed -i 's/x + x + 1/x + x/' calc.py"],
    },
    {
      id: 'no-solution',
      prompt: 'Write the answer to question.txt into answer.txt.',
      workspace: { dir: 'repos/answer' },
      evaluator: { type: 'command', command: 'test "$(cat answer.txt 2>/dev/null)" = 42', timeout: t },
    },
  ];
  const file = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(file, `${tasks.map((x) => JSON.stringify(x)).join('\n')}\n`);
  return file;
}

/** Every key of a Harbor check's --json (tasks-check-forgeries.test.ts reads the same): one shape for both kinds of task. */
const TOP_KEYS = ['ok', 'tasks', 'environment', 'forge', 'strict', 'valid', 'broken', 'unverifiable', 'invalid', 'hackable', 'escapes', 'results'];
const RESULT_KEYS = ['task', 'name', 'verdict', 'ok', 'problems', 'unverifiable', 'oracle', 'nop', 'hackable', 'escapes', 'forgeries'];

describe.skipIf(noSandbox !== null)(`polar tasks check on a JSONL task file${noSandbox ? ` (skipped: ${noSandbox})` : ''}`, () => {
  let out: CheckJson;
  let text: string;
  beforeAll(async () => {
    const file = taskFile();
    const r = await polar(['tasks', 'check', file, '--json', '--concurrency', '4']);
    expect(r.code, r.stderr).toBe(1);
    out = JSON.parse(r.stdout) as CheckJson;
    // The text report of the same file, without forgeries (fast): what a reader sees.
    const t = await polar(['tasks', 'check', file, '--no-forge', '--concurrency', '4']);
    text = t.stdout;
  }, patient(300_000));

  const result = (id: string) => out.results.find((r) => r.task === id)!;

  it('answers in the shape a Harbor check does, on the host', () => {
    for (const k of TOP_KEYS) expect(Object.keys(out), k).toContain(k);
    for (const r of out.results) for (const k of RESULT_KEYS) expect(Object.keys(r), k).toContain(k);
    expect(out).toMatchObject({ tasks: 4, environment: 'host', forge: true, ok: false });
  });

  it('passes the honest task: its solution earns 1, nop 0, no forgery wins or escapes', () => {
    const r = result('honest-answer');
    expect(r.problems, JSON.stringify(r)).toEqual([]);
    expect(r).toMatchObject({ verdict: 'valid', oracle: { outcome: 'completed', reward: 1 }, nop: { outcome: 'completed', reward: 0 } });
    expect(Object.keys(r.forgeries)).toEqual(expect.arrayContaining(['git-removed', 'git-filter', 'fork-bomb', 'huge-file']));
    // Scored 0, completed or failed (the agent's own failure is a score): never error, which would leave the group.
    for (const [name, run] of Object.entries(r.forgeries)) {
      expect(run.outcome, name).not.toBe('error');
      expect(run.reward, name).toBe(0);
    }
  });

  it("flags the task graded by npm test's exit status as hackable through package.json", () => {
    const r = result('npm-exit-status');
    expect(r.oracle.reward).toBe(1);
    expect(r.nop.reward).toBe(0);
    expect(r.verdict).toBe('broken');
    expect(r.hackable).toContain('npm-scripts');
    expect(r.problems).toContainEqual(expect.stringMatching(/^hackable: forge:npm-scripts earns 1 without solving it/));
  });

  it('holds the python3 -m unittest task: polar runs its tests by name, so no workspace unittest.py or hook wins', () => {
    const r = result('py-unittest');
    expect(Object.keys(r.forgeries)).toEqual(expect.arrayContaining(['shadow-module', 'sitecustomize', 'pth', 'exit-on-load']));
    expect(r.problems, JSON.stringify(r.forgeries)).toEqual([]);
    expect(r.verdict).toBe('valid');
  });

  it('says a task without "solution" is unverifiable: no oracle ran, nop and the forgeries did', () => {
    const r = result('no-solution');
    expect(r.verdict).toBe('unverifiable');
    expect(r.oracle).toMatchObject({ outcome: 'no-solution', reward: null });
    expect(r.unverifiable).toContainEqual(expect.stringMatching(/no "solution" for the oracle/));
    expect(r.nop.reward).toBe(0);
    expect(Object.keys(r.forgeries).length).toBeGreaterThan(0);
    expect(text).toMatch(/unverifiable no-solution {2}oracle not run \(no "solution"\), nop 0/);
    expect(text).toMatch(/valid +honest-answer {2}oracle 1, nop 0/);
  });
});

describe.skipIf(noSandbox !== null)(`polar tasks check fixtures/tasks/tasks.jsonl${noSandbox ? ` (skipped: ${noSandbox})` : ''}`, () => {
  it(
    'finds every fixture task valid: each solution earns its top reward, nop nothing, no forgery wins or escapes',
    async () => {
      const r = await polar(['tasks', 'check', FIXTURES, '--json', '--concurrency', '4']);
      const out = JSON.parse(r.stdout) as CheckJson;
      const trouble = out.results.filter((x) => !x.ok).map((x) => ({ task: x.task, problems: x.problems, unverifiable: x.unverifiable }));
      expect(trouble).toEqual([]);
      expect(r.code, r.stderr).toBe(0);
      expect(out.valid.length).toBe(out.tasks);
      for (const x of out.results) {
        expect(x.oracle.reward, x.task).toBe(1);
        expect(x.nop.reward, x.task).toBe(0);
      }
    },
    patient(300_000),
  );
});
