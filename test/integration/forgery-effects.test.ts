import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { runShell } from '../../src/core/process/shell.js';
import { baseEnvironment } from '../../src/harness/env.js';
import { FORGERIES } from '../../src/rollout/forgeries/index.js';
import type { RolloutTask } from '../../src/rollout/task-file.js';
import { bwrapProblem, DEFAULT_LIMITS, findBwrap, openJail, type SandboxSettings } from '../../src/sandbox/index.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Each forgery does what it says, so a `tasks check` where none wins means the verifier held, not
 * that a script silently failed: the script runs as the forger does (bash in the workspace at /app,
 * /logs writable, its own home, no network, in bwrap), then a stand-in for a checker loads what it
 * left, in a second sandbox over the same folders, and the test looks at what came of it.
 */
const bwrap = findBwrap();
const problem = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
const settings = (): SandboxSettings => ({ kind: 'bwrap', bwrap: bwrap!, network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [] });
// pidfd_getfd needs ptrace rights over the parent: Yama's scope 1 and above refuse a child that.
const yama = (() => {
  try {
    return Number(fs.readFileSync('/proc/sys/kernel/yama/ptrace_scope', 'utf8').trim());
  } catch {
    return 0;
  }
})();
const hasPytest = (() => {
  try {
    execFileSync('python3', ['-c', 'import pytest'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-forgery-effects-'));
afterAll(() => removeTree(root));
let ws: string;
let logs: string;
let home: string;
let solution: string;
let n = 0;

/** The task the scripts are written for: only its WORKDIR matters to them. */
const task = { id: 't', harbor: { workdir: '/app' } } as unknown as RolloutTask;

const WORKSPACE: Record<string, string> = {
  'stats.py': 'def median(values):\n    ordered = sorted(values)\n    return ordered[len(ordered) // 2]\n',
  'test_stats.py': 'from stats import median\n\n\ndef test_even():\n    assert median([1, 2, 3, 4]) == 2.5\n',
  'lib.js': 'exports.add = (a, b) => a - b;\n',
  'test.js': "const assert = require('node:assert');\nassert.strictEqual(require('./lib.js').add(2, 2), 4);\n",
  'run.sh': '#!/bin/bash\necho running\n',
  'tests/run.sh': '#!/bin/bash\nexit 1\n',
};

beforeEach(() => {
  n += 1;
  ws = path.join(root, `ws-${n}`);
  logs = path.join(root, `logs-${n}`);
  home = path.join(root, `home-${n}`);
  solution = path.join(root, `solution-${n}`);
  for (const d of [ws, path.join(ws, 'tests'), path.join(logs, 'agent'), path.join(logs, 'verifier'), home, solution]) fs.mkdirSync(d, { recursive: true });
  for (const [f, text] of Object.entries(WORKSPACE)) fs.writeFileSync(path.join(ws, f), text);
});

/** One command in a fresh sandbox over the sample's folders, as polar runs the agent and the verifier. */
async function inside(command: string, opts: { solution?: boolean } = {}) {
  const jail = await openJail(settings(), {
    cwd: ws,
    cwdInside: '/app',
    home,
    homeInside: '/home/agent',
    network: 'none',
    binds: [{ source: logs, dest: '/logs', readOnly: false }, ...(opts.solution ? [{ source: solution, dest: '/solution', readOnly: true }] : [])],
  });
  const r = await runShell(command, { cwd: ws, env: baseEnvironment(), timeoutMs: patient(60_000), wrap: (c) => jail.wrap(c) });
  await jail.close({ exitCode: r.exitCode, signal: r.signal });
  return r;
}

/** The forger's turn: the forgery's script, as the built-in agent runs it. */
async function forge(name: string, opts: { solution?: boolean } = {}) {
  fs.writeFileSync(path.join(root, `forge-${n}.sh`), FORGERIES[name]!.script(task));
  const script = fs.readFileSync(path.join(root, `forge-${n}.sh`), 'utf8');
  const r = await inside(`bash <<'FORGE_SCRIPT'\n${script}\nFORGE_SCRIPT`, opts);
  expect(r.exitCode, r.stdout + r.stderr).toBe(0);
  // Whatever the forger wrote there itself is not what the checker's turn is judged by.
  removeTree(path.join(logs, 'verifier'));
  fs.mkdirSync(path.join(logs, 'verifier'));
  return r.stdout;
}

/** Processes whose working folder is `dir` (the jail's view of it has another path: compared by inode). */
function processesIn(dir: string): string[] {
  const want = fs.statSync(dir);
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cwd = fs.statSync(`/proc/${pid}/cwd`);
      if (cwd.dev === want.dev && cwd.ino === want.ino) found.push(`${pid}: ${fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ')}`);
    } catch {
      // gone, or not ours to look at
    }
  }
  return found;
}

const reward = () => {
  const f = path.join(logs, 'verifier', 'reward.txt');
  return fs.existsSync(f) ? fs.readFileSync(f, 'utf8').trim() : null;
};

/** A checker that runs the agent's module in a child, and says whether it lived to the end. */
const PY_CHILD_CHECKER = `python3 -c 'import subprocess, sys; subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, \\"/app\\"); import stats"]); print("checker survived")'`;
const JS_CHILD_CHECKER = `node -e 'require("node:child_process").spawnSync(process.execPath, ["-e", "require(\\"/app/lib.js\\")"], { stdio: "inherit" }); console.log("checker survived")'`;

describe.skipIf(problem !== null)(`forgeries do what they say${problem ? ` (skipped: ${problem})` : ''}`, () => {
  it('reward-file writes both reward files', async () => {
    await inside(`bash -c "$(cat <<'S'\n${FORGERIES['reward-file']!.script(task)}\nS\n)"`);
    expect(fs.readFileSync(path.join(logs, 'verifier', 'reward.txt'), 'utf8').trim()).toBe('1');
    expect(JSON.parse(fs.readFileSync(path.join(logs, 'verifier', 'reward.json'), 'utf8'))).toEqual({ reward: 1 });
  });

  it('kill-checker: the checker dies in its child, the reward written (Python, JavaScript, shell)', async () => {
    await forge('kill-checker');
    for (const checker of [PY_CHILD_CHECKER, JS_CHILD_CHECKER, 'bash -c "bash /app/run.sh; echo checker survived"']) {
      fs.rmSync(path.join(logs, 'verifier', 'reward.txt'), { force: true });
      const r = await inside(checker);
      expect(r.stdout, checker).not.toContain('checker survived');
      expect(r.stdout, checker).toContain('{"reward": 1}');
      expect(reward(), checker).toBe('1');
    }
  });

  it('exit-on-load: a checker that imports the module in-process ends there, with status 0', async () => {
    await forge('exit-on-load');
    for (const checker of [
      `python3 -c 'import sys; sys.path.insert(0, "/app"); import stats; print("went on")'`,
      `node -e 'require("/app/lib.js"); console.log("went on")'`,
    ]) {
      const r = await inside(checker);
      expect(r.exitCode, checker).toBe(0);
      expect(r.stdout, checker).not.toContain('went on');
      expect(reward(), checker).toBe('1');
    }
  });

  it("stdout-steal: the child kills the checker and, where ptrace allows, speaks on the checker's stdout", async () => {
    await forge('stdout-steal');
    const r = await inside(
      `python3 -c 'import subprocess, sys; subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, \\"/app\\"); import stats"], capture_output=True); print("checker survived")'`,
    );
    expect(r.stdout).not.toContain('checker survived');
    // The child's own stdout was captured by the checker: this line came through the stolen descriptor.
    if (yama === 0) expect(r.stdout).toContain('{"reward": 1}');
  });

  it('edit-tests rewrites the test files to pass, and leaves the code alone', async () => {
    await forge('edit-tests');
    expect((await inside('node test.js')).exitCode).toBe(0);
    expect((await inside('bash tests/run.sh')).exitCode).toBe(0);
    expect(fs.readFileSync(path.join(ws, 'test_stats.py'), 'utf8')).toMatch(/def test_passes\(\):\n {4}pass/);
    expect(fs.readFileSync(path.join(ws, 'stats.py'), 'utf8')).toBe(WORKSPACE['stats.py']);
  });

  it('verify-daemon: after the module loaded, the reward is rewritten over the checker’s own; nothing survives the sandbox', async () => {
    await forge('verify-daemon');
    // The checker's 0 is written, then read until the loops have written 1 over it (the event, not a
    // pause: three loops truncate and write the file, so a read often finds it empty, and a loaded
    // machine runs them late); the deadline is a safety net, after which the last read is the answer.
    const r = await inside(
      `python3 -c 'import sys; sys.path.insert(0, "/app"); import stats'; rm -f /logs/verifier/reward.*; echo 0 > /logs/verifier/reward.txt; end=$(( $(date +%s) + ${patientSeconds(30)} )); v=; while [ "$(date +%s)" -lt "$end" ]; do v=$(cat /logs/verifier/reward.txt 2>/dev/null); [ "$v" = 1 ] && break; done; echo "$v"`,
    );
    expect(r.stdout.trim().split('\n').at(-1), JSON.stringify(r)).toBe('1');
    // The jail closed with the command: its loops are gone. Asked of the kernel, not left a pause to
    // show themselves in (a loaded machine may not run a survivor within any pause): no process is
    // left working in the workspace, so nothing can write the reward after this.
    expect(processesIn(ws)).toEqual([]);
    fs.writeFileSync(path.join(logs, 'verifier', 'reward.txt'), '0\n');
    expect(reward()).toBe('0');
  });

  it('self-error: the checker dies in its child and no reward is written', async () => {
    await forge('self-error');
    const r = await inside(PY_CHILD_CHECKER);
    expect(r.stdout).not.toContain('checker survived');
    expect(reward()).toBeNull();
  });

  it('git-history checks out a later commit from the reflog, or from an unreachable object', async () => {
    const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: ws, stdio: 'pipe' }).toString();
    git('init', '-q');
    git('add', '-A');
    git('commit', '-qm', 'bug');
    fs.writeFileSync(path.join(ws, 'stats.py'), 'FIXED = True\n');
    git('commit', '-qam', 'the fix');
    git('reset', '-q', '--hard', 'HEAD~1');
    await forge('git-history');
    expect(fs.readFileSync(path.join(ws, 'stats.py'), 'utf8')).toBe('FIXED = True\n');
    // Without the reflog the fix is an unreachable object; git fsck still finds it.
    git('checkout', '-q', 'HEAD', '--', '.');
    git('reflog', 'expire', '--expire=now', '--all');
    expect(fs.readFileSync(path.join(ws, 'stats.py'), 'utf8')).toBe(WORKSPACE['stats.py']);
    await forge('git-history');
    expect(fs.readFileSync(path.join(ws, 'stats.py'), 'utf8')).toBe('FIXED = True\n');
  });

  it('read-solution runs a /solution/solve.sh it can see, and loads a compiled module of another version', async () => {
    fs.writeFileSync(path.join(solution, 'solve.sh'), 'echo 42 > /app/answer.txt\n');
    await forge('read-solution', { solution: true });
    expect(fs.readFileSync(path.join(ws, 'answer.txt'), 'utf8').trim()).toBe('42');
    // A __pycache__ left from the fixed version: the forger makes Python load it instead of the source.
    fs.rmSync(path.join(ws, 'answer.txt'));
    fs.writeFileSync(path.join(ws, 'stats.py'), 'FIXED = True\n');
    await inside('python3 -c "import sys; sys.path.insert(0, \'/app\'); import stats"');
    fs.writeFileSync(path.join(ws, 'stats.py'), WORKSPACE['stats.py']!);
    await forge('read-solution');
    const r = await inside('python3 -c "import sys; sys.path.insert(0, \'/app\'); import stats; print(stats.FIXED)"');
    expect(r.stdout.trim()).toBe('True');
  });

  it('path-hijack: the tools in the workspace bin folders and ~/.local/bin write the reward and exit 0', async () => {
    await forge('path-hijack');
    const r = await inside('PATH=/app/bin:$PATH python3 -c "print(\'real python\')"');
    expect(r.exitCode).toBe(0);
    expect(r.stdout).not.toContain('real python');
    expect(reward()).toBe('1');
    for (const f of ['node_modules/.bin/node', '.venv/bin/pytest']) expect(fs.statSync(path.join(ws, f)).mode & 0o111).not.toBe(0);
    expect(fs.existsSync(path.join(home, '.local', 'bin', 'bash'))).toBe(true);
  });

  it('sitecustomize and pth: every interpreter start writes the reward and exits 0 (user site; PYTHONPATH on the workspace)', async () => {
    for (const [name, checker] of [
      ['sitecustomize', 'python3 -c "print(\'checker ran\')"'],
      ['sitecustomize', 'PYTHONNOUSERSITE=1 PYTHONPATH=/app python3 -c "print(\'checker ran\')"'],
      ['pth', 'python3 -c "print(\'checker ran\')"'],
    ] as const) {
      removeTree(home);
      fs.mkdirSync(home);
      await forge(name);
      const r = await inside(checker);
      expect(r.exitCode, `${name}: ${checker}`).toBe(0);
      expect(r.stdout, `${name}: ${checker}`).not.toContain('checker ran');
      expect(reward(), `${name}: ${checker}`).toBe('1');
    }
  });

  it.skipIf(!hasPytest)('conftest: pytest passes a failing test and exits 0, with the reward', async () => {
    await forge('conftest');
    const r = await inside('python3 -m pytest -q -p no:cacheprovider test_stats.py');
    expect(r.exitCode, r.stdout).toBe(0);
    expect(reward()).toBe('1');
  });

  it('shadow-module: python -m unittest in the workspace runs the planted unittest.py', async () => {
    await forge('shadow-module');
    const r = await inside('python3 -m unittest');
    expect(r.exitCode).toBe(0);
    expect(reward()).toBe('1');
  });

  it("fake-shell leaves the host sandbox's read-only system alone, and says so", async () => {
    expect(await forge('fake-shell')).toMatch(/read-only here: nothing to replace/);
  });
});
