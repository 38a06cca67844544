import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { gradeNamed } from '../../src/rollout/evaluators/named-tests/grade.js';
import { runnerFor } from '../../src/rollout/evaluators/named-tests/registry.js';
import type { RunnerName } from '../../src/rollout/task-file.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * polar's named-test runners against the real pytest, unittest and node test runner, with the
 * workspace an attacker under RL would leave: runner configuration (pytest.ini, pyproject.toml,
 * setup.cfg, tox.ini with `addopts = --co`, a plugin loaded from the workspace), a module named like
 * the runner, code that ends the process on import. The bug stays unfixed in every case, so each
 * named test must come out failed or not run; the same files with the bug fixed must pass. The
 * commands run as the evaluator runs them, here without the sandbox (the sandbox's part is
 * named-tests-rollout.test.ts).
 */
const FIZZ = path.resolve(__dirname, '../../fixtures/tasks/repos/py-fizzbuzz');
const SUM = path.resolve(__dirname, '../../fixtures/tasks/repos/js-sum');
const FIXED_FIZZ = fs
  .readFileSync(path.join(FIZZ, 'fizzbuzz.py'), 'utf8')
  .replace('    if n % 3 == 0:\n', '    if n % 15 == 0:\n        return "FizzBuzz"\n    if n % 3 == 0:\n');
const hasPytest = spawnSync('python3', ['-I', '-c', 'import pytest'], { stdio: 'ignore' }).status === 0;

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) removeTree(d);
  dirs = [];
});

/** A copy of `from` with `files` written over it. */
function workspace(from: string, files: Record<string, string> = {}): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-named-'));
  dirs.push(dir);
  fs.cpSync(from, path.join(dir, 'ws'), { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, 'ws', name)), { recursive: true });
    fs.writeFileSync(path.join(dir, 'ws', name), text);
  }
  return path.join(dir, 'ws');
}

/** Runs `ids` with polar's runner in `ws`: each id's outcome and the run's exit status. */
async function grade(runner: RunnerName, ws: string, ids: string[], args: string[] = []): Promise<{ outcomes: string[]; exit: number | null }> {
  const r = runnerFor(runner);
  const reportDir = fs.mkdtempSync(path.join(path.dirname(ws), 'report-'));
  const run = spawnSync('bash', ['-c', r.command(ids, args)], { cwd: ws, env: { ...process.env, POLAR_REPORT_DIR: reportDir }, encoding: 'utf8' });
  const report = await r.read(reportDir).catch(() => new Map());
  return {
    outcomes: gradeNamed(
      r.covers,
      ids.map((id) => ({ id, kind: 'fail_to_pass' as const })),
      report,
    ).map((t) => t.outcome),
    exit: run.status,
  };
}

const F2P_UNITTEST = ['test_fizzbuzz.FizzBuzzTest.test_fizzbuzz', 'test_fizzbuzz.FizzBuzzTest.test_plain'];
const F2P_PYTEST = ['test_fizzbuzz.py::FizzBuzzTest::test_fizzbuzz', 'test_fizzbuzz.py::FizzBuzzTest::test_plain'];

describe('unittest runner', () => {
  it('passes the fixed code and fails the unfixed, test by test', async () => {
    expect((await grade('unittest', workspace(FIZZ, { 'fizzbuzz.py': FIXED_FIZZ }), F2P_UNITTEST)).outcomes).toEqual(['passed', 'passed']);
    expect((await grade('unittest', workspace(FIZZ), F2P_UNITTEST)).outcomes).toEqual(['failed', 'passed']);
    // A class names all of its tests: one failing fails it.
    expect((await grade('unittest', workspace(FIZZ), ['test_fizzbuzz.FizzBuzzTest'])).outcomes).toEqual(['failed']);
  });

  it('is not a workspace unittest.py that exits 0', async () => {
    const ws = workspace(FIZZ, { 'unittest.py': 'import sys\nsys.exit(0)\n' });
    // What the task's own command did before: the workspace module stood in for the runner.
    expect(execFileSync('bash', ['-c', 'python3 -m unittest -q test_fizzbuzz.FizzBuzzTest.test_fizzbuzz; echo $?'], { cwd: ws, encoding: 'utf8' }).trim()).toBe(
      '0',
    );
    expect((await grade('unittest', ws, F2P_UNITTEST)).outcomes).toEqual(['failed', 'passed']);
  });

  it('counts a test that never ran as not run, whatever the exit status', async () => {
    const ws = workspace(FIZZ, { 'fizzbuzz.py': `${FIXED_FIZZ}\nimport os\nos._exit(0)\n` });
    const r = await grade('unittest', ws, F2P_UNITTEST);
    expect(r.exit).toBe(0);
    expect(r.outcomes).toEqual(['not run', 'not run']);
    expect((await grade('unittest', workspace(FIZZ), ['test_fizzbuzz.FizzBuzzTest.test_nothing_of_that_name'])).outcomes).toEqual(['not run']);
  });
});

describe.skipIf(!hasPytest)(`pytest runner${hasPytest ? '' : ' (skipped: python3 -I has no pytest here)'}`, () => {
  it('passes the fixed code and fails the unfixed', async () => {
    expect((await grade('pytest', workspace(FIZZ, { 'fizzbuzz.py': FIXED_FIZZ }), F2P_PYTEST)).outcomes).toEqual(['passed', 'passed']);
    expect((await grade('pytest', workspace(FIZZ), F2P_PYTEST)).outcomes).toEqual(['failed', 'passed']);
  });

  const COLLECT_ONLY: Record<string, Record<string, string>> = {
    'pytest.ini': { 'pytest.ini': '[pytest]\naddopts = --co -q\n' },
    '.pytest.ini': { '.pytest.ini': '[pytest]\naddopts = --co -q\n' },
    'pyproject.toml': { 'pyproject.toml': '[tool.pytest.ini_options]\naddopts = "--co -q"\n' },
    'setup.cfg': { 'setup.cfg': '[tool:pytest]\naddopts = --co -q\n' },
    'tox.ini': { 'tox.ini': '[pytest]\naddopts = --co -q\n' },
    'a plugin on pythonpath': {
      'pytest.ini': '[pytest]\npythonpath = .\naddopts = -p forgeplug\n',
      'forgeplug.py': 'import pytest\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_call(item):\n    item.runtest = lambda: None\n',
    },
    'a pytest.py in the workspace': { 'pytest.py': 'import sys\nsys.exit(0)\n' },
  };
  it.each(Object.keys(COLLECT_ONLY))('ignores the workspace configuration: %s', async (name) => {
    const ws = workspace(FIZZ, COLLECT_ONLY[name]);
    // Each one beats `python3 -m pytest` by exit status (the hole it closes).
    expect(spawnSync('python3', ['-m', 'pytest', '-q', F2P_PYTEST[0]!], { cwd: ws, stdio: 'ignore' }).status).toBe(0);
    expect((await grade('pytest', ws, F2P_PYTEST)).outcomes).toEqual(['failed', 'passed']);
  });

  it('loads no conftest.py above the folder of the named tests', async () => {
    const ws = workspace(FIZZ, {
      'conftest.py': 'import pytest\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_call(item):\n    item.runtest = lambda: None\n',
    });
    fs.mkdirSync(path.join(ws, 'tests'));
    fs.renameSync(path.join(ws, 'test_fizzbuzz.py'), path.join(ws, 'tests/test_fizzbuzz.py'));
    fs.writeFileSync(path.join(ws, 'tests/__init__.py'), '');
    expect((await grade('pytest', ws, ['tests/test_fizzbuzz.py::FizzBuzzTest::test_fizzbuzz'])).outcomes).toEqual(['failed']);
  });
});

describe('node test runner', () => {
  const IDS = ['test.js > sum adds two positive numbers', 'test.js > sum adds a negative and a positive number'];
  const FIXED_SUM = 'function sum(a, b) {\n  return a + b;\n}\n\nmodule.exports = { sum };\n';

  it('passes the fixed code and fails the unfixed', async () => {
    expect((await grade('node-test', workspace(SUM, { 'sum.js': FIXED_SUM }), IDS)).outcomes).toEqual(['passed', 'passed']);
    expect((await grade('node-test', workspace(SUM), IDS)).outcomes).toEqual(['failed', 'failed']);
    // A file names all of its tests.
    expect((await grade('node-test', workspace(SUM, { 'sum.js': FIXED_SUM }), ['test.js'])).outcomes).toEqual(['passed']);
  });

  it('counts a file whose code exits on load as not run', async () => {
    const ws = workspace(SUM, { 'sum.js': 'process.exit(0);\n' });
    // `node test.js`, graded by exit status, paid this.
    expect(spawnSync('node', ['test.js'], { cwd: ws, stdio: 'ignore' }).status).toBe(0);
    expect((await grade('node-test', ws, [...IDS, 'test.js'])).outcomes).toEqual(['not run', 'not run', 'not run']);
  });

  it('takes no options from NODE_OPTIONS or package.json scripts', async () => {
    const ws = workspace(SUM, { 'package.json': '{"scripts": {"test": "exit 0"}}\n', 'skip.cjs': 'require("node:test").mock?.fn; process.exit(0);\n' });
    const r = spawnSync('bash', ['-c', runnerFor('node-test').command(IDS, [])], {
      cwd: ws,
      env: { ...process.env, POLAR_REPORT_DIR: path.dirname(ws), NODE_OPTIONS: `--require ${path.join(ws, 'skip.cjs')}` },
    });
    expect(r.status).not.toBe(0);
    const report = await runnerFor('node-test').read(path.dirname(ws));
    expect(
      gradeNamed(
        runnerFor('node-test').covers,
        IDS.map((id) => ({ id, kind: 'fail_to_pass' as const })),
        report,
      ).map((t) => t.outcome),
    ).toEqual(['failed', 'failed']);
  });
});
