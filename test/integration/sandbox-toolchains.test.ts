import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import { writeRolloutTasks } from '../support/agent-rollout.js';
import { patient } from '../support/patience.js';
import { polarCli } from '../support/polar-cli.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 39, item 2: python3 from a pyenv outside the home (/opt/pyenv-like: a git checkout whose
 * shims exec libexec/pyenv, which execs versions/X/bin/python3). The sandbox bound only shims/ and
 * bin/, so every Python evaluator exited 127 and scored 0 with nothing said, and `polar tasks
 * check` called the Python fixtures broken. Now the root is bound and they score as without; and a
 * command the machine's sandbox cannot run ends the sample `error` (unverifiable in tasks check),
 * while a program the agent deleted still scores 0.
 *
 * The pyenv is built in the checkout, not /tmp (the sandbox's /tmp is its own) nor the home.
 */
const bwrap = findBwrap();
const REPO = path.resolve(__dirname, '../..');
const python = ['/usr/bin/python3', '/usr/local/bin/python3', '/bin/python3'].find((p) => fs.existsSync(p));
const skip =
  bwrap === null
    ? 'bubblewrap is not installed'
    : (bwrapProblem(bwrap) ??
      (['/tmp/', '/var/tmp/'].some((t) => `${REPO}/`.startsWith(t)) ? 'the checkout is under /tmp, which the sandbox replaces' : null) ??
      (python ? null : 'no system python3 to stand behind the fake pyenv'));

describe.skipIf(skip !== null)(`toolchains in the sandbox${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let root: string;
  let pyenv: string;
  let mock: MockServer;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(REPO, 'test', '.toolchains-'));
    pyenv = path.join(root, 'opt', 'pyenv');
    const version = path.join(pyenv, 'versions', '3.11.0', 'bin');
    for (const d of ['.git', 'libexec', 'bin', 'shims', version]) fs.mkdirSync(path.resolve(pyenv, d), { recursive: true });
    // pyenv's own dispatcher, cut down: `pyenv exec NAME` runs NAME from the selected version.
    fs.writeFileSync(
      path.join(pyenv, 'libexec', 'pyenv'),
      [
        '#!/usr/bin/env bash',
        'set -e',
        '[ "$1" = exec ] || { echo "pyenv: no such command \'$1\'" >&2; exit 1; }',
        'program="$2"; shift 2',
        'bin="$PYENV_ROOT/versions/$(cat "$PYENV_ROOT/version")/bin/$program"',
        '[ -x "$bin" ] || { echo "pyenv: $program: command not found" >&2; exit 127; }',
        'exec "$bin" "$@"',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    fs.symlinkSync('../libexec/pyenv', path.join(pyenv, 'bin', 'pyenv'));
    fs.writeFileSync(path.join(pyenv, 'version'), '3.11.0\n');
    fs.symlinkSync(python!, path.join(version, 'python3'));
    // The shims as `pyenv rehash` writes them, the root baked in. python3.14 has no version behind it.
    for (const name of ['python3', 'python3.14'])
      fs.writeFileSync(
        path.join(pyenv, 'shims', name),
        `#!/usr/bin/env bash\nset -e\nprogram="\${0##*/}"\nexport PYENV_ROOT="${pyenv}"\nexec "${pyenv}/libexec/pyenv" exec "$program" "$@"\n`,
        { mode: 0o755 },
      );
    // This pyenv's shims first; no toolchain from the home (a real pyenv there would answer instead).
    const rest = (process.env.PATH ?? '').split(':').filter((p) => p !== '' && !p.startsWith(os.homedir()) && !p.includes('pyenv'));
    env = { ...process.env, PATH: [path.join(pyenv, 'shims'), path.join(pyenv, 'bin'), ...rest].join(':'), NO_COLOR: '1' };
    delete env.PYENV_ROOT;
    delete env.PYENV_VERSION;
    mock = await startMockServer({});
  });
  afterAll(async () => {
    await mock?.close();
    if (root) removeTree(root);
  });

  it('Python evaluators score as without the pyenv; a deleted program scores 0; an interpreter the sandbox lacks ends error', {
    timeout: patient(180_000),
  }, async () => {
    const repo = path.join(root, 'py-repo');
    fs.mkdirSync(repo);
    fs.writeFileSync(path.join(repo, 'stats.py'), 'def mean(values):\n    return sum(values) / len(values)\n');
    fs.writeFileSync(
      path.join(repo, 'test_stats.py'),
      'import unittest\nfrom stats import mean\n\nclass EmptyTest(unittest.TestCase):\n    def test_empty(self):\n        self.assertEqual(mean([]), 0.0)\n',
    );
    fs.writeFileSync(path.join(repo, 'run.sh'), '#!/bin/sh\necho 1\n', { mode: 0o755 });
    const fix = "sed -i 's|return sum(values) / len(values)|return sum(values) / len(values) if values else 0.0|' stats.py";
    const tasks = writeRolloutTasks(path.join(root, 'tasks.jsonl'), [
      {
        id: 'py-tests',
        prompt: fix,
        workspace: { dir: repo },
        evaluator: { type: 'tests', fail_to_pass: ['python3 -m unittest -q test_stats'], pass_to_pass: [], timeout: 60 },
      },
      {
        id: 'py-command',
        prompt: 'echo 42 > answer.txt',
        evaluator: { type: 'command', command: "python3 -c \"print(1 if open('answer.txt').read().strip() == '42' else 0)\"", timeout: 60 },
      },
      // The agent's own 127s: the evaluator runs a program of the workspace, which the agent deleted.
      { id: 'deleted-path', prompt: 'rm run.sh', workspace: { dir: repo }, evaluator: { type: 'command', command: './run.sh', timeout: 60 } },
      {
        id: 'deleted-on-path',
        prompt: 'rm run.sh',
        workspace: { dir: repo },
        evaluator: { type: 'command', command: 'PATH="$PWD:$PATH" run.sh', timeout: 60 },
      },
      // The agent's code claims a missing interpreter the task never names: still the agent's 0.
      {
        id: 'says-not-found',
        // The name is put together at run time: the task file (shown to evaluators) holds this prompt.
        prompt: `printf '%s\\n' 'n=jul; echo "bash: \${n}ia: command not found" >&2; exit 127' > run.sh`,
        workspace: { dir: repo },
        evaluator: { type: 'command', command: 'bash run.sh', timeout: 60 },
      },
      // The machine's: a shim with no version behind it, and a name on no PATH at all.
      { id: 'no-version', prompt: 'true', evaluator: { type: 'command', command: 'python3.14 -c "print(1)"', timeout: 60 } },
      { id: 'no-interpreter', prompt: 'true', evaluator: { type: 'command', command: 'polar-no-such-interpreter -c 1', timeout: 60 } },
    ]);
    const db = path.join(root, 'rollout.db');
    const r = await polarCli(
      [
        'rollout',
        '--tasks',
        tasks,
        '--harness',
        'custom',
        '--command',
        'bash -c {prompt}',
        '--upstream',
        mock.url,
        '--db',
        db,
        '--samples',
        '1',
        '--sandbox',
        'bwrap',
        '--out',
        path.join(root, 'out'),
        '--json',
      ],
      { env, timeout: patient(170_000) },
    );
    expect(r.stdout, r.stderr).toContain('rolloutId');
    const summary = JSON.parse(r.stdout) as { rolloutId: string };
    const store = Store.open(db);
    try {
      const by = new Map(store.rollouts.samples(summary.rolloutId).map((s) => [s.taskId, s]));
      const scored = (id: string) => ({ status: by.get(id)?.status, reward: by.get(id)?.reward });
      expect(scored('py-tests')).toEqual({ status: 'completed', reward: 1 });
      expect(scored('py-command')).toEqual({ status: 'completed', reward: 1 });
      expect(scored('deleted-path')).toEqual({ status: 'completed', reward: 0 });
      expect(scored('deleted-on-path')).toEqual({ status: 'completed', reward: 0 });
      expect(scored('says-not-found')).toEqual({ status: 'completed', reward: 0 });
      expect(by.get('says-not-found')?.evaluator?.exit_code).toBe(127);
      for (const [id, name] of [
        ['no-version', 'python3.14'],
        ['no-interpreter', 'polar-no-such-interpreter'],
      ] as const) {
        const s = by.get(id)!;
        expect(s.status, id).toBe('error');
        expect(s.reward, id).toBeNull();
        expect(s.errorStage, id).toBe('post');
        expect(s.error, id).toContain(`cannot run ${name}`);
        expect(s.error, id).toContain('--sandbox-ro');
      }
    } finally {
      store.close();
    }
  });

  it('polar tasks check: a Python fixture is valid, and one whose verifier needs an interpreter the sandbox lacks is unverifiable, not broken', {
    timeout: patient(180_000),
  }, async () => {
    const tasks = path.join(root, 'harbor');
    fs.mkdirSync(tasks);
    fs.cpSync(path.join(REPO, 'fixtures', 'harbor', 'py-fix-median'), path.join(tasks, 'py-fix-median'), { recursive: true });
    const lacking = path.join(tasks, 'py-lacking');
    fs.cpSync(path.join(REPO, 'fixtures', 'harbor', 'py-fix-median'), lacking, { recursive: true });
    const test = path.join(lacking, 'tests', 'test.sh');
    fs.writeFileSync(test, fs.readFileSync(test, 'utf8').replace(/^python3 /m, 'python3.14 '));
    const r = await polarCli(['tasks', 'check', tasks, '--environment', 'host', '--no-forge', '--json'], { env, timeout: patient(170_000) });
    const checks = JSON.parse(r.stdout) as { results: { name: string; verdict: string; problems: string[]; unverifiable: string[] }[] };
    const by = new Map(checks.results.map((c) => [c.name, c]));
    expect(by.get('py-fix-median')).toMatchObject({ verdict: 'valid', problems: [] });
    expect(by.get('py-lacking')).toMatchObject({ verdict: 'unverifiable', problems: [] });
    expect(by.get('py-lacking')!.unverifiable.join('\n')).toMatch(/cannot run python3\.14/);
  });
});
