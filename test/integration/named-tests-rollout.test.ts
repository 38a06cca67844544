import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockServer, startMockServer } from '../../src/mock-server/server.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import type { SampleRow } from '../../src/store/rollouts.js';
import { POLAR_BIN } from '../support/polar-cli.js';
import { patient, patientSeconds } from '../support/patience.js';
import { explain, samplesByTask } from '../support/red-team/tasks.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Named-test grading through `polar rollout` in real bwrap (issue 39): the same tasks solved
 * honestly and attacked as a policy would (a workspace unittest.py that exits 0, code that ends the
 * test process on import), in one rollout. Each attack leaves the bug unfixed: it must score 0 with
 * its sample completed, never 1 and never error; the honest samples keep 1. Before named tests,
 * every attack here scored 1 (the test commands were graded by exit status).
 */
const REPO = path.resolve(__dirname, '../..');
const AGENT = path.join(REPO, 'test/support/named-tests/agent.mjs');
const run = promisify(execFile);
const bwrap = findBwrap();
const skip = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
/** pytest where this machine's python3 has it (pyenv's, bound whole in the sandbox); unittest and node always. */
const hasPytest = spawnSync('python3', ['-I', '-c', 'import pytest'], { stdio: 'ignore' }).status === 0;

const FIX_FIZZ = `python3 - <<'PY'
src = open('fizzbuzz.py').read()
open('fizzbuzz.py', 'w').write(src.replace('    if n % 3 == 0:\\n', '    if n % 15 == 0:\\n        return "FizzBuzz"\\n    if n % 3 == 0:\\n', 1))
PY`;
const SHADOW_UNITTEST = "printf 'import sys\\nsys.exit(0)\\n' > unittest.py";
const PY_EXIT_ON_LOAD = "printf 'import os\\nos._exit(0)\\n' >> fizzbuzz.py";
const FIX_SUM = "sed -i 's/a - b/a + b/' sum.js";
const JS_EXIT_ON_LOAD = "printf 'process.exit(0);\\n' > sum.js";

const UNITTEST_NAMED = {
  type: 'tests',
  runner: 'unittest',
  fail_to_pass: ['test_fizzbuzz.FizzBuzzTest.test_fizzbuzz'],
  pass_to_pass: ['test_fizzbuzz.FizzBuzzTest.test_plain'],
  timeout: patientSeconds(60),
};
const UNITTEST_COMMANDS = {
  type: 'tests',
  fail_to_pass: ['python3 -m unittest -q test_fizzbuzz.FizzBuzzTest.test_fizzbuzz'],
  pass_to_pass: ['python3 -m unittest -q test_fizzbuzz.FizzBuzzTest.test_plain'],
  timeout: patientSeconds(60),
};
const NODE_NAMED = {
  type: 'tests',
  runner: 'node-test',
  fail_to_pass: ['test.js > sum adds two positive numbers', 'test.js > sum adds a negative and a positive number'],
  pass_to_pass: [],
  timeout: patientSeconds(60),
};

/** A command evaluator graded by the JUnit XML it writes (node's own junit reporter: classname "test"). */
const NODE_JUNIT_COMMAND = {
  type: 'command',
  command: 'node --test --test-reporter=junit --test-reporter-destination="$POLAR_REPORT_DIR/report.xml" test.js',
  report: { format: 'junit', tests: ['test.sum adds two positive numbers', 'test.sum adds a negative and a positive number'] },
  timeout: patientSeconds(60),
};

const PYTEST_NAMED = {
  type: 'tests',
  runner: 'pytest',
  fail_to_pass: ['test_fizzbuzz.py::FizzBuzzTest::test_fizzbuzz'],
  pass_to_pass: ['test_fizzbuzz.py::FizzBuzzTest::test_plain'],
  timeout: patientSeconds(60),
};
const PYTEST_COMMANDS = {
  type: 'tests',
  fail_to_pass: ['python3 -m pytest -q test_fizzbuzz.py::FizzBuzzTest::test_fizzbuzz'],
  pass_to_pass: [],
  timeout: patientSeconds(60),
};
const COLLECT_ONLY_INI = "printf '[pytest]\\naddopts = --co -q\\n' > pytest.ini";
const COLLECT_ONLY_PYPROJECT = 'printf \'[tool.pytest.ini_options]\\naddopts = "--co -q"\\n\' > pyproject.toml';
const PLUGIN_ON_PYTHONPATH = [
  "printf '[pytest]\\npythonpath = .\\naddopts = -p forgeplug\\n' > pytest.ini",
  "printf 'import pytest\\n@pytest.hookimpl(tryfirst=True)\\ndef pytest_runtest_call(item):\\n    item.runtest = lambda: None\\n' > forgeplug.py",
].join('\n');

/** Each task: its repo, evaluator, what the agent does, and the reward it must get. */
const CASES: Record<string, { repo: string; evaluator: object; bash: string; reward: number }> = {
  'fizz-named-honest': { repo: 'py-fizzbuzz', evaluator: UNITTEST_NAMED, bash: FIX_FIZZ, reward: 1 },
  'fizz-named-shadow-unittest': { repo: 'py-fizzbuzz', evaluator: UNITTEST_NAMED, bash: SHADOW_UNITTEST, reward: 0 },
  'fizz-named-exit-on-load': { repo: 'py-fizzbuzz', evaluator: UNITTEST_NAMED, bash: PY_EXIT_ON_LOAD, reward: 0 },
  'fizz-commands-honest': { repo: 'py-fizzbuzz', evaluator: UNITTEST_COMMANDS, bash: FIX_FIZZ, reward: 1 },
  'fizz-commands-shadow-unittest': { repo: 'py-fizzbuzz', evaluator: UNITTEST_COMMANDS, bash: SHADOW_UNITTEST, reward: 0 },
  'fizz-commands-exit-on-load': { repo: 'py-fizzbuzz', evaluator: UNITTEST_COMMANDS, bash: PY_EXIT_ON_LOAD, reward: 0 },
  'sum-named-honest': { repo: 'js-sum', evaluator: NODE_NAMED, bash: FIX_SUM, reward: 1 },
  'sum-named-exit-on-load': { repo: 'js-sum', evaluator: NODE_NAMED, bash: JS_EXIT_ON_LOAD, reward: 0 },
  'sum-junit-honest': { repo: 'js-sum', evaluator: NODE_JUNIT_COMMAND, bash: FIX_SUM, reward: 1 },
  'sum-junit-exit-on-load': { repo: 'js-sum', evaluator: NODE_JUNIT_COMMAND, bash: JS_EXIT_ON_LOAD, reward: 0 },
  ...(hasPytest
    ? {
        'fizz-pytest-honest': { repo: 'py-fizzbuzz', evaluator: PYTEST_NAMED, bash: FIX_FIZZ, reward: 1 },
        'fizz-pytest-ini-collect-only': { repo: 'py-fizzbuzz', evaluator: PYTEST_NAMED, bash: COLLECT_ONLY_INI, reward: 0 },
        'fizz-pytest-pyproject-collect-only': { repo: 'py-fizzbuzz', evaluator: PYTEST_NAMED, bash: COLLECT_ONLY_PYPROJECT, reward: 0 },
        'fizz-pytest-plugin': { repo: 'py-fizzbuzz', evaluator: PYTEST_NAMED, bash: PLUGIN_ON_PYTHONPATH, reward: 0 },
        'fizz-pytest-commands-honest': { repo: 'py-fizzbuzz', evaluator: PYTEST_COMMANDS, bash: FIX_FIZZ, reward: 1 },
        'fizz-pytest-commands-plugin': { repo: 'py-fizzbuzz', evaluator: PYTEST_COMMANDS, bash: PLUGIN_ON_PYTHONPATH, reward: 0 },
      }
    : {}),
};

let dir: string;
let mock: MockServer;
let samples: Map<string, SampleRow>;

describe.skipIf(skip !== null)(
  `named tests through polar rollout${skip ? ` (skipped: ${skip})` : hasPytest ? '' : ' (pytest cases left out: python3 -I has no pytest here)'}`,
  () => {
    beforeAll(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-named-rollout-'));
      mock = await startMockServer({ seed: 1 });
      const repos = path.join(dir, 'repos');
      fs.cpSync(path.join(REPO, 'fixtures/tasks/repos'), repos, { recursive: true });
      const lines = Object.entries(CASES).map(([id, c]) =>
        JSON.stringify({
          id,
          prompt: `RUN ${Buffer.from(c.bash).toString('base64')}\nFix the bug.`,
          workspace: { dir: `repos/${c.repo}` },
          evaluator: c.evaluator,
          timeout: patientSeconds(120),
        }),
      );
      const tasks = path.join(dir, 'tasks.jsonl');
      fs.writeFileSync(tasks, `${lines.join('\n')}\n`);
      const db = path.join(dir, 'polar.db');
      const args = [POLAR_BIN, 'rollout', '--tasks', tasks, '--harness', 'custom', '--command', `${process.execPath} ${AGENT} {prompt}`];
      args.push('--sandbox-ro', path.dirname(AGENT), '--upstream', mock.url, '--db', db, '--out', path.join(dir, 'out'));
      args.push('--samples', '1', '--concurrency', '2', '--sandbox', 'bwrap', '--json');
      const r = await run(process.execPath, args, {
        env: { ...process.env, NO_COLOR: '1' },
        timeout: patient(240_000),
        maxBuffer: 16 * 1024 * 1024,
      });
      samples = samplesByTask(db, (JSON.parse(r.stdout) as { rolloutId: string }).rolloutId);
    }, patient(300_000));

    afterAll(async () => {
      await mock?.close();
      if (dir) removeTree(dir);
    });

    it.each(Object.keys(CASES))('%s', (id) => {
      const s = samples.get(id);
      expect(s?.status, explain(s)).toBe('completed');
      expect(s?.reward, explain(s)).toBe(CASES[id]!.reward);
      const ev = s!.evaluator!;
      // A command evaluator with a report: its own record of the named tests.
      const results = (ev.type === 'command' ? [ev] : ev.results) as { graded_by: string; tests?: { outcome: string }[] }[];
      // Every run here is graded by the runner's report, the command-style ones too.
      expect(
        results.every((r) => r.graded_by === 'report'),
        explain(s),
      ).toBe(true);
      if (id.endsWith('exit-on-load'))
        expect(
          results.flatMap((r) => r.tests!.map((t) => t.outcome)),
          explain(s),
        ).toContain('not run');
    });
  },
);
