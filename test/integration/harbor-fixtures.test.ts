import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildStartingState } from '../../src/rollout/harbor/trial.js';
import { scoreOnHost } from '../support/score.js';
import { removeWorkspace } from '../../src/rollout/workspace.js';
import { loadTasks } from '../../src/rollout/load-tasks.js';
import { baseEnvironment } from '../../src/harness/env.js';
import { bwrapProblem, DEFAULT_LIMITS, findBwrap, type SandboxSettings } from '../../src/sandbox/index.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * The Harbor fixtures' verifiers against code an agent under RL could write: the agent's module
 * runs in a child process, so a module that writes a reward of 1 (reward.txt and reward.json) and
 * exits on import does not score itself, while a right answer still scores. Real bwrap, the real
 * verifier path (rollout/harbor/trial.ts).
 */
const FIXTURES = path.resolve(__dirname, '../../fixtures/harbor');
const bwrap = findBwrap();
const problem = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
const tasks = new Map(loadTasks(FIXTURES).map((t) => [t.id, t]));
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-harbor-fixtures-'));
});
afterAll(() => {
  removeTree(dir);
});

const PY_SELF =
  'import os\nos.makedirs("/logs/verifier", exist_ok=True)\nopen("/logs/verifier/reward.txt", "w").write("1\\n")\nopen("/logs/verifier/reward.json", "w").write("{\\"reward\\": 1}")\nprint("{\\"reward\\": 1}")\nos._exit(0)\n';
const JS_SELF =
  "const fs = require('node:fs');\nfs.mkdirSync('/logs/verifier', { recursive: true });\nfs.writeFileSync('/logs/verifier/reward.txt', '1\\n');\nfs.writeFileSync('/logs/verifier/reward.json', '{\"reward\": 1}');\nconsole.log('{\"reward\": 1}');\nprocess.exit(0);\n";

/** A loop the module leaves running that rewrites the reward files for 10 s (the checker's own write included). */
const PY_DAEMON = [
  'import os, time',
  'if os.fork() == 0:',
  '    os.setsid()',
  '    if os.fork() == 0:',
  // Off the checker's pipes, or the checker would wait for the loop to end.
  '        null = os.open(os.devnull, os.O_RDWR)',
  '        for fd in (0, 1, 2):',
  '            os.dup2(null, fd)',
  '        end = time.time() + 10',
  '        while time.time() < end:',
  '            for n, v in (("reward.txt", "1\\n"), ("reward.json", \'{"reward": 1}\')):',
  '                try:',
  '                    open("/logs/verifier/" + n, "w").write(v)',
  '                except OSError:',
  '                    pass',
  '            time.sleep(0.002)',
  '    os._exit(0)',
  'time.sleep(0.3)',
  '',
].join('\n');
const DAEMON_LOOP = `const fs = require('node:fs');
const end = Date.now() + 10000;
const t = setInterval(() => {
  for (const [n, v] of [['reward.txt', '1\\n'], ['reward.json', '{"reward": 1}']]) {
    try { fs.writeFileSync('/logs/verifier/' + n, v); } catch {}
  }
  if (Date.now() > end) clearInterval(t);
}, 2);`;
// The module waits until the loop runs (Node takes a while to start), so it is writing when the checker writes its own.
const JS_DAEMON = `require('node:child_process').spawn(process.execPath, ['-e', ${JSON.stringify(DAEMON_LOOP)}], { detached: true, stdio: 'ignore' }).unref();
const until = Date.now() + 400; while (Date.now() < until) {}\n`;
/** Writes a reward of 1, then kills the checker that loaded it (its parent): test.sh exits 137. */
const PY_KILL = 'import os, signal\nopen("/logs/verifier/reward.txt", "w").write("1\\n")\nos.kill(os.getppid(), signal.SIGKILL)\n';
const JS_KILL = "require('node:fs').writeFileSync('/logs/verifier/reward.txt', '1\\n');\nprocess.kill(process.ppid, 'SIGKILL');\n";

const cases: { task: string; file: string; self: string; right: string; rightReward: number }[] = [
  {
    task: 'py-fix-median',
    file: 'stats.py',
    self: PY_SELF,
    right: 'def median(values):\n    o = sorted(values)\n    m = len(o) // 2\n    return o[m] if len(o) % 2 else (o[m - 1] + o[m]) / 2\n',
    rightReward: 1,
  },
  {
    task: 'partial-credit',
    file: 'shapes.py',
    self: PY_SELF,
    right:
      'def square(s):\n    return s * s\n\ndef rectangle(w, h):\n    return w * h\n\ndef circle(r):\n    raise NotImplementedError\n\ndef triangle(b, h):\n    return b * h / 2\n',
    rightReward: 0.75,
  },
  {
    task: 'js-fix-slugify',
    file: 'slugify.js',
    self: JS_SELF,
    right: "module.exports = { slugify: (t) => t.toLowerCase().replace(/ +/g, '-') };\n",
    rightReward: 1,
  },
];

describe.skipIf(problem !== null)(`Harbor fixture verifiers against self-scoring code${problem ? ` (skipped: ${problem})` : ''}`, () => {
  const settings = (): SandboxSettings => ({ kind: 'bwrap', bwrap: bwrap!, network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [] });
  it.each(cases)(
    '$task: a module that writes its own reward on import scores 0; a right one scores',
    async ({ task: taskId, file, self, right, rightReward }) => {
      const trial = tasks.get(taskId)!.harbor!;
      const py = file.endsWith('.py');
      for (const [name, code, want] of [
        ['self', self, 0],
        // No answer at all, but a loop left running that rewrites the reward files past the checker's own write.
        ['daemon', py ? PY_DAEMON : JS_DAEMON, 0],
        ['kill-checker', py ? PY_KILL : JS_KILL, 0],
        ['right', right, rightReward],
      ] as const) {
        const ws = path.join(dir, `${taskId}-${name}`);
        await buildStartingState(trial, ws);
        fs.writeFileSync(path.join(ws, file), code);
        try {
          const task = tasks.get(taskId)!;
          const out = await scoreOnHost(task, { dir: ws, baseline: '' }, '', { env: baseEnvironment(), scratch: dir, sandbox: settings() });
          expect(out.reward, `${taskId} ${name}: ${String(out.record.output)} ${String(out.record.forfeit ?? '')}`).toBe(want);
          if (name === 'kill-checker') expect(out.record.forfeit).toMatch(/exited 137: killed by SIGKILL/);
          else expect(out.record.reward_file).toBe('reward.txt');
        } finally {
          await removeWorkspace(ws);
        }
      }
    },
  );
});
