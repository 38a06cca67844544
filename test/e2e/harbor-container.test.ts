import { type ChildProcess, execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockServer, startMockServer } from '../../src/mock-server/server.js';
import { mockTasksFrom } from '../../src/mock-server/tasks.js';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { loadTasks } from '../../src/rollout/load-tasks.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import { gymRows } from '../../src/train/gym-agent/wiring.js';
import { writeFixtureCheckout } from '../support/nemo-rl-checkout.js';
import { queuedJobs, startTestPostgres } from '../support/postgres.js';
import { expectSessionCapturedExactly, gymAgentArgs, harnessRolloutArgs, polarE2e, postGymRuns, startPolarServer } from './support.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * A Harbor task in its own image (`--environment docker|podman`, issue 26). Skipped, saying why,
 * where no engine answers `info`. On Debian machines like CI's, podman runs once configured
 * (runc, cgroupfs, rlimits it may set: .ci/run does it) with a `debian:12-slim` made offline by
 * debootstrap; the image is `FROM` that. The task's Dockerfile has a RUN step the host environment
 * could not reproduce: the answer comes from it, so a reward of 1 means the task's own image ran.
 * The agent's right answer checks first that /tests and /solution are absent, so a run that could see
 * them earns nothing. Claude Code and Codex run inside the container against the mock model (their
 * Node and CLI mounted read-only, the proxy through the bridge, no network) and every call is
 * captured exactly.
 */
const run = promisify(execFile);
const engine = workingEngines()[0] ?? null;
const bwrap = findBwrap();
const skip =
  engine === null
    ? 'no container engine works here (`docker info` and `podman info` fail)'
    : bwrap === null
      ? 'bubblewrap is not installed'
      : bwrapProblem(bwrap);
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-harbor-ctr-'));
});
afterAll(() => {
  removeTree(dir);
});

const polar = (args: string[]) => polarE2e(args);

/** `polar rollout` of two samples in the engine against the mock model: its JSON summary. */
async function mockRollout(tasks: string, harness: string, mock: MockServer, db: string) {
  const r = await polar(harnessRolloutArgs({ tasks, harness, upstream: mock.url, samples: 2, db, extra: ['--environment', engine!] }));
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { rolloutId: string; outcomes: Record<string, number>; groups: { rewards: number[] }[] };
}

function writeTask(ds: string): void {
  const task = path.join(ds, 'in-image');
  for (const d of ['environment', 'tests', 'solution']) fs.mkdirSync(path.join(task, d), { recursive: true });
  fs.writeFileSync(
    path.join(task, 'task.toml'),
    [
      'version = "1.0"',
      '[metadata.mock]',
      'correct = ["test ! -e /tests && test ! -e /solution && cat /built.txt > answer.txt"]',
      'wrong = ["echo nope > answer.txt"]',
      '[verifier]',
      `timeout_sec = ${patientSeconds(60)}.0`,
      '[agent]',
      `timeout_sec = ${patientSeconds(120)}.0`,
      '[environment]',
      'allow_internet = false',
      'cpus = 1',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(path.join(task, 'instruction.md'), 'Write the contents of /built.txt to /app/answer.txt.\n');
  fs.writeFileSync(
    path.join(task, 'environment', 'Dockerfile'),
    'FROM debian:12-slim\nRUN echo built-in-image > /built.txt\nWORKDIR /app\nCOPY start.txt .\nRUN echo from-a-run-step > generated.txt\n',
  );
  fs.writeFileSync(path.join(task, 'environment', 'start.txt'), 'start\n');
  fs.writeFileSync(path.join(task, 'solution', 'solve.sh'), 'if [ -e /tests ]; then echo seen > /app/tests-seen; fi\ncat /built.txt > /app/answer.txt\n');
  fs.writeFileSync(
    path.join(task, 'tests', 'test.sh'),
    [
      's=0; [ "$(cat /app/answer.txt 2>/dev/null)" = built-in-image ] && s=1',
      // The reward needs tests/ to have been absent while the oracle ran.
      'h=1; [ -e /app/tests-seen ] && h=0 && s=0',
      'echo "{\\"reward\\": $s, \\"tests_hidden\\": $h}" > /logs/verifier/reward.json',
      '',
    ].join('\n'),
  );
}

describe.skipIf(skip !== null)(`Harbor tasks in their own image${skip ? ` (skipped: ${skip})` : ` (${engine})`}`, () => {
  it(
    'the oracle earns the reward only the image can give, tests/ stays hidden, nop earns nothing, and the image is built once',
    async () => {
      const ds = path.join(dir, 'ds');
      writeTask(ds);
      const rollout = (agent: string, db: string) =>
        polar(['rollout', '--tasks', ds, '--harness', agent, '--samples', '1', '--environment', engine!, '--db', path.join(dir, db), '--json']);
      const first = await rollout('oracle', 'oracle.db');
      expect(first.code, first.stderr).toBe(0);
      expect(JSON.parse(first.stdout).groups[0].rewards).toEqual([1]);
      const nop = await rollout('nop', 'nop.db');
      expect(nop.code, nop.stderr).toBe(0);
      expect(JSON.parse(nop.stdout).groups[0].rewards).toEqual([0]);
      // The same content is the same tag: no second build.
      expect(nop.stderr).not.toMatch(/building polar-harbor\//);
      // None of these two rollouts' containers is left (others' suites may run theirs meanwhile).
      for (const r of [first, nop]) {
        const id = String(JSON.parse(r.stdout).rolloutId).replace(/[^a-zA-Z0-9_.-]+/g, '-');
        const left = await run(engine!, ['ps', '-aq', '--filter', `name=polar-${id}`]);
        expect(left.stdout.trim()).toBe('');
      }
    },
    patient(300_000),
  );

  it(
    'a process the agent leaves running cannot rewrite the reward or the answer while the verifier runs',
    async () => {
      const ds = path.join(dir, 'planted');
      writeTask(ds);
      const task = path.join(ds, 'in-image');
      // The wrong answer, and a loop in the background that waits for the verifier, then keeps writing
      // the right answer and a reward of 1.
      fs.writeFileSync(
        path.join(task, 'solution', 'solve.sh'),
        [
          `setsid sh -c 'until [ -e /tests/test.sh ]; do sleep 0.02; done; while :; do mkdir -p /logs/verifier; echo "{\\"reward\\": 1}" > /logs/verifier/reward.json; echo built-in-image > /app/answer.txt; sleep 0.02; done' > /dev/null 2>&1 < /dev/null &`,
          'echo nope > /app/answer.txt',
          '',
        ].join('\n'),
      );
      // test.sh waits a moment, so the loop has time to act on an unprotected run.
      fs.writeFileSync(path.join(task, 'tests', 'test.sh'), `sleep 0.5; ${fs.readFileSync(path.join(task, 'tests', 'test.sh'), 'utf8')}`);
      const r = await polar(
        harnessRolloutArgs({ tasks: ds, harness: 'oracle', samples: 1, db: path.join(dir, 'planted.db'), extra: ['--environment', engine!] }),
      );
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).groups[0].rewards).toEqual([0]);
    },
    patient(300_000),
  );

  for (const harness of ['claude-code', 'codex']) {
    it(
      `${harness} works inside the task's container against the mock model: a right and a wrong run, every call captured exactly`,
      async () => {
        const ds = path.join(dir, 'ds');
        if (!fs.existsSync(ds)) writeTask(ds);
        const mock = await startMockServer({ tasks: mockTasksFrom(loadTasks(ds)), seed: 1 });
        try {
          const db = path.join(dir, `${harness}.db`);
          const summary = await mockRollout(ds, harness, mock, db);
          expect(summary.outcomes.completed).toBe(2);
          expect([...summary.groups[0]!.rewards].sort()).toEqual([0, 1]);
          const store = Store.open(db, { readonly: true });
          const samples = store.rollouts.samples(summary.rolloutId);
          const sessions = samples.map((s) => s.sessionId!);
          store.close();
          // The diff is the agent's work in the container's WORKDIR: the image's own files (COPY and
          // RUN) are the baseline, not changes.
          const right = samples.find((s) => s.reward === 1)!;
          const wrong = samples.find((s) => s.reward === 0)!;
          expect(right.diff).toMatch(/\+\+\+ b\/answer\.txt[\s\S]*\n\+built-in-image\n/);
          expect(wrong.diff).toMatch(/\+\+\+ b\/answer\.txt[\s\S]*\n\+nope\n/);
          for (const s of samples) expect(s.diff).not.toMatch(/start\.txt|generated\.txt|\.claude|\.codex/);
          for (const session of sessions) expect(expectSessionCapturedExactly(db, session, mock)).toBeGreaterThan(0);
        } finally {
          await mock.close();
        }
      },
      patient(300_000),
    );
  }

  it(
    'polar gym-agent runs a Harbor row in its container: the reward from test.sh, the calls captured',
    async () => {
      const ds = path.join(dir, 'ds');
      if (!fs.existsSync(ds)) writeTask(ds);
      const tasks = loadTasks(ds);
      const mock = await startMockServer({ tasks: mockTasksFrom(tasks), seed: 1, nemoRl: { temperature: 1, topP: 1 } });
      const db = path.join(dir, 'gym.db');
      const children: ChildProcess[] = [];
      try {
        const args = gymAgentArgs(['--harness', 'claude-code'], mock, db, ds, path.join(dir, 'gym-out'));
        const { json, stderr } = await startPolarServer(args, children);
        // No --environment: the engine that works here is the default, and the agent says so.
        expect(stderr()).toMatch(new RegExp(`Harbor tasks run in their own images with ${engine}`));
        const { results } = await postGymRuns(String(json.url), gymRows(tasks), 2);
        expect(results.map((r) => r.reward).sort(), results.map((r) => r.polar_mask_reason).join('; ')).toEqual([0, 1]);
        const store = Store.open(db, { readonly: true });
        try {
          for (const r of results)
            expect(store.rollouts.sampleForSession(r.polar_session_id)!.evaluator).toMatchObject({ type: 'harbor', environment: engine });
        } finally {
          store.close();
        }
        for (const r of results) expect(expectSessionCapturedExactly(db, r.polar_session_id, mock)).toBeGreaterThan(0);
      } finally {
        for (const c of children) c.kill('SIGTERM');
        await mock.close();
      }
    },
    patient(300_000),
  );

  it(
    'polar train grpo with Harbor tasks starts its Gym agent in the same environment (here the engine)',
    async () => {
      const ds = path.join(dir, 'ds');
      if (!fs.existsSync(ds)) writeTask(ds);
      const checkout = writeFixtureCheckout(path.join(dir, 'RL'));
      const runDir = path.join(dir, 'train-dry');
      const args = ['train', 'grpo', '--dry-run', '--nemo-rl', checkout, '--model', 'Qwen/Qwen3-0.6B', '--tasks', ds, '--harness', 'claude-code'];
      const r = await polar([...args, '--prompts-per-step', '1', '--run-dir', runDir]);
      expect(r.code, r.stderr).toBe(0);
      const app = fs.readFileSync(path.join(runDir, 'gym/responses_api_agents/polar_agent/app.py'), 'utf8');
      expect(app).toContain(`"--environment","${engine}"`);
      const host = await polar([...args, '--prompts-per-step', '1', '--environment', 'host', '--run-dir', `${runDir}-host`]);
      expect(host.code, host.stderr).toBe(0);
      expect(fs.readFileSync(path.join(`${runDir}-host`, 'gym/responses_api_agents/polar_agent/app.py'), 'utf8')).toContain('"--environment","host"');
    },
    patient(120_000),
  );

  it(
    'a queued rollout: a worker runs the Harbor task in its container, the reward from test.sh',
    async () => {
      const ds = path.join(dir, 'ds');
      if (!fs.existsSync(ds)) writeTask(ds);
      const [pg, mock] = await Promise.all([startTestPostgres(), startMockServer({ seed: 1 })]);
      try {
        const url = await pg.database('queue');
        // A harness with no model: it does the task's work itself, inside the container.
        const harness = ['--harness', 'custom', '--command', 'sh -c "cat /built.txt > answer.txt"', '--upstream', mock.url];
        const waiting = polar(['rollout', '--queue', url, '--tasks', ds, ...harness, '--samples', '2', '--wait', '--json']);
        let waited: string | null = null;
        void waiting.then((r) => (waited = `rollout --queue exited ${r.code}: ${r.stderr}`));
        // The worker idles out after 5 s with nothing to take: it starts once the samples are queued.
        await queuedJobs(url, 'custom', 2, () => waited);
        const worker = await polar(['worker', '--queue', url, ...harness, '--idle-exit', '5', '--out', path.join(dir, 'worker-out')]);
        expect(worker.code, worker.stderr).toBe(0);
        expect(worker.stderr).toMatch(new RegExp(`Harbor tasks run in their own images with ${engine}`));
        const done = await waiting;
        expect(done.code, `${done.stderr}\n${done.stdout}`).toBe(0);
        expect(JSON.parse(done.stdout)).toMatchObject({ status: 'completed', outcomes: { completed: 2 }, groups: [{ rewards: [1, 1] }] });
      } finally {
        await mock.close();
        await pg.close();
      }
    },
    patient(240_000),
  );

  it(
    "task.toml's [agent]/[verifier].user and [environment].memory_mb hold in the container",
    async () => {
      const task = path.join(dir, 'as-user', 'as-user');
      for (const d of ['environment', 'tests', 'solution']) fs.mkdirSync(path.join(task, d), { recursive: true });
      fs.writeFileSync(
        path.join(task, 'task.toml'),
        [
          'version = "1.0"',
          '[metadata.mock]',
          `correct = ["id -un > /app/agent-user && (cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes) > /app/mem"]`,
          'wrong = ["echo root > /app/agent-user && echo 0 > /app/mem"]',
          '[agent]',
          'user = "nobody"',
          '[verifier]',
          'user = "nobody"',
          '[environment]',
          'memory_mb = 300',
          'allow_internet = false',
          '',
        ].join('\n'),
      );
      fs.writeFileSync(path.join(task, 'instruction.md'), 'Say who you are.\n');
      fs.writeFileSync(path.join(task, 'environment', 'Dockerfile'), 'FROM debian:12-slim\nWORKDIR /app\nRUN chown nobody /app\n');
      fs.writeFileSync(
        path.join(task, 'solution', 'solve.sh'),
        'id -un > /app/agent-user\n(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes) > /app/mem\n',
      );
      fs.writeFileSync(
        path.join(task, 'tests', 'test.sh'),
        [
          'r=0; [ "$(cat /app/agent-user)" = nobody ] && [ "$(id -un)" = nobody ] && r=1',
          'echo "{\\"reward\\": $r, \\"mem_mb\\": $(( $(cat /app/mem) / 1048576 ))}" > /logs/verifier/reward.json',
          '',
        ].join('\n'),
      );
      const db = path.join(dir, 'as-user.db');
      const r = await polar([
        'rollout',
        '--tasks',
        path.dirname(task),
        '--harness',
        'oracle',
        '--samples',
        '1',
        '--environment',
        engine!,
        '--db',
        db,
        '--json',
      ]);
      expect(r.code, r.stderr).toBe(0);
      const summary = JSON.parse(r.stdout);
      const store = Store.open(db, { readonly: true });
      const [sample] = store.rollouts.samples(summary.rolloutId);
      store.close();
      expect(sample!.error).toBeNull();
      expect(sample!.evaluator).toMatchObject({ rewards: { reward: 1, mem_mb: 300 } });
      // Claude Code as that user too: its private home and the proxy's socket are reachable to it.
      const mock = await startMockServer({ tasks: mockTasksFrom(loadTasks(path.dirname(task))), seed: 1 });
      try {
        const cdb = path.join(dir, 'as-user-claude.db');
        const c = await mockRollout(path.dirname(task), 'claude-code', mock, cdb);
        expect([...c.groups[0]!.rewards].sort()).toEqual([0, 1]);
      } finally {
        await mock.close();
      }
    },
    patient(300_000),
  );

  it(
    'polar tasks check runs oracle and nop in the task images (the default where an engine works)',
    async () => {
      const ds = path.join(dir, 'ds');
      if (!fs.existsSync(ds)) writeTask(ds);
      const r = await polar(['tasks', 'check', ds, '--json']);
      expect(r.code, r.stderr).toBe(0);
      // The oracle's 1 needs the image's RUN step: it ran in the image.
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, environment: engine, results: [{ oracle: { reward: 1 }, nop: { reward: 0 } }] });
      // An image that cannot be built: one problem, the engine's reason first, and the way out.
      const unbuildable = path.join(dir, 'unbuildable');
      writeTask(unbuildable);
      fs.writeFileSync(path.join(unbuildable, 'in-image', 'environment', 'Dockerfile'), 'FROM localhost/polar-no-such-image:1\nWORKDIR /app\n');
      // An image this machine cannot build says nothing about the task: unverifiable here (exit 0; --strict: 1).
      const bad = await polar(['tasks', 'check', unbuildable, '--json']);
      expect(bad.code).toBe(0);
      const [result] = JSON.parse(bad.stdout).results;
      expect(result.verdict).toBe('unverifiable');
      expect(result.problems).toEqual([]);
      expect(result.unverifiable).toHaveLength(1);
      expect(result.unverifiable[0]).toMatch(/polar-no-such-image/);
      expect((await polar(['tasks', 'check', unbuildable, '--json', '--strict'])).code).toBe(1);
    },
    patient(300_000),
  );
});
