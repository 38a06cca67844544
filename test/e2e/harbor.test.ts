import { type ChildProcess, execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { mockTasksFrom } from '../../src/mock-server/tasks.js';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { loadTasks } from '../../src/rollout/load-tasks.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import { gymRows } from '../../src/train/gym-agent/wiring.js';
import { BIN, expectSessionCapturedExactly, gymAgentArgs, postGymRuns, startPolarServer } from './support.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Harbor task folders end to end (issue 26), on the host environment (`--environment host`: the
 * fixtures' base images cannot be pulled offline; the container path is test/e2e/harbor-container.test.ts).
 * Claude Code and Codex against the mock model on fixtures/harbor: rewards come from each
 * task's tests/test.sh, named rewards are kept. An agent that looks for the tests and the solution
 * finds neither, and the reward it plants does not count. `polar tasks check` flags the fixture
 * whose oracle is wrong on purpose.
 */
const run = promisify(execFile);
const FIXTURES = path.resolve(__dirname, '../../fixtures/harbor');
const PROBE = path.resolve(__dirname, '../support/harbor-probe');
const bwrap = findBwrap();
const noSandbox = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-harbor-'));
});
afterAll(() => {
  removeTree(dir);
});

async function polar(args: string[], timeout = patient(280_000)): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1' }, timeout, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** `polar rollout` on the host environment (an engine that works here would otherwise be the default). */
const hostRollout = (args: string[], timeout?: number) => polar(['rollout', '--environment', 'host', ...args], timeout);

describe.skipIf(noSandbox !== null)(`Harbor tasks on the host environment${noSandbox ? ` (skipped: ${noSandbox})` : ''}`, () => {
  describe('polar rollout --tasks fixtures/harbor --harness claude-code against the mock model', () => {
    const tasks = loadTasks(FIXTURES);
    let mock: MockServer;
    let summary: { rolloutId: string; status: string; groups: { taskId: string; rewards: number[] }[]; outcomes: Record<string, number> };
    let stderr: string;
    const db = () => path.join(dir, 'claude.db');

    beforeAll(async () => {
      mock = await startMockServer({ tasks: mockTasksFrom(tasks), seed: 3 });
      const r = await hostRollout(['--tasks', FIXTURES, '--harness', 'claude-code', '--upstream', mock.url, '--samples', '2', '--db', db(), '--json']);
      stderr = r.stderr;
      summary = JSON.parse(r.stdout);
    }, patient(300_000));
    afterAll(async () => {
      await mock?.close();
    });

    it("every sample completes with test.sh's reward, and every group has a right and a wrong run", () => {
      expect(summary.status, stderr).toBe('completed');
      expect(summary.outcomes.completed).toBe(tasks.length * 2);
      for (const g of summary.groups) expect(new Set(g.rewards).size, `${g.taskId}: ${g.rewards}`).toBe(2);
      // The partial-credit task's wrong run implements two of four functions.
      expect(summary.groups.find((g) => g.taskId === 'partial-credit')!.rewards.sort()).toEqual([0.5, 1]);
      // The host environment says once per task what it does not reproduce.
      expect(stderr).toMatch(
        /task py-fix-median: the host environment does not reproduce the base image python:3\.12-slim or these Dockerfile steps:\n\s+RUN pip install --no-cache-dir pytest==8\.3\.3/,
      );
    });

    it('named rewards are kept with the sample; every call is captured exactly', () => {
      const store = Store.open(db(), { readonly: true });
      const rows = store.rollouts.samples(summary.rolloutId);
      store.close();
      const csv = rows.filter((s) => s.taskId === 'csv-to-json');
      const named = csv.map((s) => s.evaluator!.rewards as Record<string, number>);
      expect(named.map((n) => n.reward).sort()).toEqual(csv.map((s) => s.reward).sort());
      expect(named.find((n) => n.reward === 1)).toEqual({ valid_json: 1, rows: 1, types: 1, reward: 1 });
      expect(named.find((n) => (n.reward ?? 1) < 1)!.rows).toBe(0);
      for (const s of rows) {
        expect(s.evaluator!.type).toBe('harbor');
        // The workspace the agent changed is /app's: its diff names the task's own files.
        if (s.taskId === 'py-fix-median') expect(s.diff).toMatch(/stats\.py/);
        expect(expectSessionCapturedExactly(db(), s.sessionId!, mock)).toBeGreaterThanOrEqual(2);
      }
    });

    it("exports carry the task's name, its metadata and the named rewards; the report shows them per group", async () => {
      const out = path.join(dir, 'traces.jsonl');
      const e = await polar(['export', '--rollout', summary.rolloutId, '--db', db(), '--out', out]);
      expect(e.code, e.stderr).toBe(0);
      const traces = fs
        .readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .map(
          (l) =>
            JSON.parse(l) as {
              task_id: string;
              reward: number;
              metadata: { task_name: string; task_metadata: Record<string, unknown>; rewards: Record<string, number> };
            },
        );
      const js = traces.find((t) => t.task_id === 'js-fix-slugify')!;
      expect(js.metadata.task_name).toBe('polar/js-fix-slugify');
      expect(js.metadata.task_metadata).toMatchObject({ difficulty: 'easy', language: 'javascript' });
      for (const t of traces.filter((x) => x.task_id === 'csv-to-json')) expect(t.metadata.rewards).toMatchObject({ reward: t.reward, valid_json: 1 });
      const html = path.join(dir, 'report.html');
      const r = await polar(['report', '--rollout', summary.rolloutId, '--db', db(), '--out', html]);
      expect(r.code, r.stderr).toBe(0);
      const page = fs.readFileSync(html, 'utf8');
      expect(page).toMatch(/named rewards \(mean\)/);
      expect(page).toMatch(/<tr data-task="csv-to-json">[^\n]*valid_json 1(\.000)? · rows [\d.]+ · types [\d.]+/);
      expect(page).toMatch(/<tr data-task="js-fix-slugify"><td>js-fix-slugify <span class="task-name">polar\/js-fix-slugify<\/span>/);
    });
  });

  it(
    'codex runs the same suite: every sample completes, every group has a right and a wrong run',
    async () => {
      const tasks = loadTasks(FIXTURES);
      const mock = await startMockServer({ tasks: mockTasksFrom(tasks), seed: 5 });
      try {
        const db = path.join(dir, 'codex.db');
        const r = await hostRollout(['--tasks', FIXTURES, '--harness', 'codex', '--upstream', mock.url, '--samples', '2', '--db', db, '--json']);
        const summary = JSON.parse(r.stdout) as {
          status: string;
          rolloutId: string;
          outcomes: Record<string, number>;
          groups: { taskId: string; rewards: number[] }[];
        };
        expect(summary.status, r.stderr).toBe('completed');
        expect(summary.outcomes.completed).toBe(tasks.length * 2);
        for (const g of summary.groups) expect(new Set(g.rewards).size, `${g.taskId}: ${g.rewards}`).toBe(2);
        const store = Store.open(db, { readonly: true });
        const rows = store.rollouts.samples(summary.rolloutId);
        store.close();
        for (const s of rows) expect(expectSessionCapturedExactly(db, s.sessionId!, mock)).toBeGreaterThanOrEqual(2);
      } finally {
        await mock.close();
      }
    },
    patient(300_000),
  );

  it(
    'polar gym-agent --tasks fixtures/harbor: /run rows name Harbor tasks by id; rewards come from their test.sh',
    async () => {
      const tasks = loadTasks(FIXTURES).filter((t) => ['partial-credit', 'csv-to-json'].includes(t.id));
      const mock = await startMockServer({ tasks: mockTasksFrom(tasks), seed: 5, nemoRl: { temperature: 1, topP: 1 } });
      const db = path.join(dir, 'gym.db');
      const children: ChildProcess[] = [];
      try {
        const args = gymAgentArgs(['--harness', 'claude-code'], mock, db, FIXTURES, path.join(dir, 'gym-out'));
        const { json, stderr } = await startPolarServer([...args, '--environment', 'host'], children);
        const { rows, results } = await postGymRuns(String(json.url), gymRows(tasks), 2);
        const store = Store.open(db, { readonly: true });
        try {
          results.forEach((r, i) => {
            expect(r.instance_config, r.polar_mask_reason).toBeUndefined();
            const sample = store.rollouts.sampleForSession(r.polar_session_id)!;
            expect(sample.taskId).toBe(rows[i]!.task_id);
            expect(sample.evaluator!.type).toBe('harbor');
            expect(r.reward).toBe(sample.reward);
          });
        } finally {
          store.close();
        }
        for (let g = 0; g < results.length; g += 2) expect(new Set([results[g]!.reward, results[g + 1]!.reward]).size).toBe(2);
        expect(stderr()).toMatch(/task partial-credit: the host environment does not reproduce the base image python:3\.12-slim/);
      } finally {
        for (const c of children) c.kill('SIGTERM');
        await mock.close();
      }
    },
    patient(300_000),
  );

  it(
    'the agent finds neither the tests nor the solution, and a reward it plants does not count',
    async () => {
      const ds = path.join(dir, 'probe-ds');
      const task = path.join(ds, 'probe');
      for (const d of ['environment', 'tests', 'solution']) fs.mkdirSync(path.join(task, d), { recursive: true });
      fs.writeFileSync(path.join(task, 'task.toml'), 'version = "1.0"\n[verifier]\ntimeout_sec = 30.0\n[agent]\ntimeout_sec = 180.0\n');
      fs.writeFileSync(path.join(task, 'instruction.md'), `PROBE ${task}\n`);
      fs.writeFileSync(path.join(task, 'environment', 'Dockerfile'), 'FROM ubuntu:24.04\nWORKDIR /app\nCOPY start.txt .\n');
      fs.writeFileSync(path.join(task, 'environment', 'start.txt'), 'start\n');
      fs.writeFileSync(path.join(task, 'tests', 'polar-hidden-marker-tests.txt'), 'x\n');
      fs.writeFileSync(path.join(task, 'solution', 'polar-hidden-marker-solution.txt'), 'x\n');
      fs.writeFileSync(path.join(task, 'solution', 'solve.sh'), 'touch /app/solved\n');
      // Writes a reward only when the task is solved: the agent's planted one must not stand in for it.
      fs.writeFileSync(path.join(task, 'tests', 'test.sh'), 'ls /tests\nif [ -f /app/solved ]; then echo 1 > /logs/verifier/reward.txt; fi\n');
      const mock = await startMockServer({ seed: 1 });
      try {
        const db = path.join(dir, 'probe.db');
        const r = await hostRollout([
          '--tasks',
          ds,
          '--harness',
          'custom',
          '--command',
          `${process.execPath} ${path.join(PROBE, 'agent.mjs')} {prompt}`,
          '--sandbox-ro',
          PROBE,
          '--upstream',
          mock.url,
          '--samples',
          '1',
          '--db',
          db,
          '--json',
        ]);
        const summary = JSON.parse(r.stdout);
        const store = Store.open(db, { readonly: true });
        const [sample] = store.rollouts.samples(summary.rolloutId);
        store.close();
        const added = (sample!.diff ?? '')
          .split('\n')
          .filter((l) => l.startsWith('+') && !l.startsWith('+++'))
          .map((l) => l.slice(1))
          .join('\n');
        const probe = JSON.parse(added);
        expect(probe).toEqual({
          cwd: '/app',
          tests: false,
          solution: false,
          logs: true,
          hostTaskDir: false,
          hostTests: false,
          relativeTests: false,
          markers: [],
        });
        // The verifier saw /tests (its output lists the marker) and wrote no reward: the sample scores
        // 0 with the reason and the verifier's output, not the 1 the agent planted (and not `error`,
        // which would drop it out of its group).
        expect(sample!.status).toBe('completed');
        expect(sample!.reward).toBe(0);
        expect(sample!.evaluator?.forfeit).toMatch(/wrote no reward/);
        expect(String(sample!.evaluator?.output)).toMatch(/polar-hidden-marker-tests\.txt/);
      } finally {
        await mock.close();
      }
    },
    patient(300_000),
  );

  it("a clean filter in a task's own .git/config never runs on the host when polar commits the starting state", async () => {
    const task = path.join(dir, 'filter-ds', 'filtered');
    const env = path.join(task, 'environment');
    fs.mkdirSync(path.join(task, 'tests'), { recursive: true });
    fs.mkdirSync(env, { recursive: true });
    const marker = path.join(dir, `filter-ran-${process.pid}`);
    await run('git', ['init', '--quiet', env]);
    fs.appendFileSync(path.join(env, '.git', 'config'), `[filter "x"]\n\tclean = touch ${marker}; cat\n`);
    fs.writeFileSync(path.join(env, '.gitattributes'), '* filter=x\n');
    fs.writeFileSync(path.join(env, 'Dockerfile'), 'FROM ubuntu:24.04\nWORKDIR /app\nCOPY . .\n');
    fs.writeFileSync(path.join(task, 'task.toml'), 'version = "1.0"\n');
    fs.writeFileSync(path.join(task, 'instruction.md'), 'nothing to do\n');
    fs.writeFileSync(path.join(task, 'tests', 'test.sh'), 'echo 0 > /logs/verifier/reward.txt\n');
    const r = await hostRollout(['--tasks', path.dirname(task), '--harness', 'nop', '--samples', '1', '--db', path.join(dir, 'filter.db'), '--json']);
    expect(JSON.parse(r.stdout).outcomes.completed, r.stderr).toBe(1);
    expect(fs.existsSync(marker)).toBe(false);
  });

  it('usage errors before anything starts: Harbor tasks without the sandbox, a container engine that does not work here', async () => {
    const db = path.join(dir, 'usage.db');
    const none = await hostRollout(['--tasks', FIXTURES, '--harness', 'oracle', '--samples', '1', '--sandbox', 'none', '--db', db]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/Harbor tasks run in the sandbox/);
    // Where docker works the rollout runs in it (test/e2e/harbor-container.test.ts): nothing to refuse.
    if (workingEngines().includes('docker')) return;
    const docker = await polar(['rollout', '--tasks', FIXTURES, '--harness', 'oracle', '--samples', '1', '--environment', 'docker', '--db', db]);
    expect(docker.code).toBe(2);
    expect(docker.stderr).toMatch(/--environment docker: no working docker here \(`docker info` fails\)/);
    expect(fs.existsSync(db)).toBe(false);
  });

  it(
    'polar tasks check flags the fixture whose oracle is wrong, with the verifier output, and passes the rest',
    async () => {
      const r = await polar(['tasks', 'check', FIXTURES, '--environment', 'host', '--json']);
      expect(r.code, r.stderr).toBe(1);
      const out = JSON.parse(r.stdout) as {
        ok: boolean;
        broken: string[];
        results: { task: string; problems: string[]; oracle: { reward: number; rewards: Record<string, number>; output: string }; nop: { reward: number } }[];
      };
      expect(out.ok).toBe(false);
      expect(out.broken).toEqual(['broken-oracle']);
      const broken = out.results.find((x) => x.task === 'broken-oracle')!;
      expect(broken.problems[0]).toMatch(/the oracle \(solution\/solve\.sh\) earned 0, not the top reward 1/);
      expect(broken.oracle.output).toMatch(/answer\.txt holds: 43/);
      for (const x of out.results) expect(x.nop.reward, x.task).toBe(0);
      expect(out.results.find((x) => x.task === 'csv-to-json')!.oracle.rewards).toEqual({ valid_json: 1, rows: 1, types: 1, reward: 1 });
    },
    patient(300_000),
  );
});
