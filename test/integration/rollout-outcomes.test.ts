import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { Store } from '../../src/store/store.js';
import { nodeAgentHarness, POLAR_BIN, polarCli } from '../support/polar-cli.js';
import { startRolloutBench, type RolloutBench } from '../support/agent-rollout.js';
import { startReferenceUpstream } from '../support/reference-upstream/index.js';
import { patient } from '../support/patience.js';

/**
 * Issue 30, what a rollout's outcomes become downstream: a resumed token-in rollout stays token-in;
 * a sample that ended `error` is no reward-0 row in a Gym export (polar's statistics leave it out) and
 * is said to be unjudged, not "ran without --accept"; sessions `polar replay` recorded stay out of
 * reconstruct and verify-faithfulness unless asked for; a rollout whose every sample errored exits 3.
 */
const polar = (args: string[]) => polarCli(args, { timeout: patient(120_000), maxBuffer: 64 * 1024 * 1024 });
const TITO = ['--upstream-kind', 'vllm-tito', '--tokenizer', 'bundled:qwen3'];

let bench: RolloutBench;

beforeAll(async () => {
  bench = await startRolloutBench('polar-rollout-outcomes-');
});
afterAll(() => bench?.close());

function lines(stdout: string): Record<string, any>[] {
  return stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

describe('--resume with a new --upstream URL', () => {
  it(
    'keeps the stored vllm-tito kind and tokenizer: the resumed samples are token-in like the first ones, and every session is text-checked',
    async () => {
      // The first server holds its replies, so the rollout is stopped (Ctrl-C) with one sample
      // running (its one call held) and the others not yet run; the resume goes to a second server
      // at another port.
      const first = await startReferenceUpstream({ holdAt: 0 });
      const moved = await startReferenceUpstream();
      try {
        const tasks = bench.taskFile('resume.jsonl', [
          { id: 'one', prompt: 'calls=1 write:answer.txt:1' },
          { id: 'two', prompt: 'calls=1 write:answer.txt:0' },
        ]);
        const db = path.join(bench.dir, 'resume.db');
        const args = bench.args(tasks, db, ['--samples', '2', '--concurrency', '1', '--init-workers', '1', ...TITO], first.url);
        const child = spawn(process.execPath, [POLAR_BIN, ...args], { stdio: 'ignore' });
        const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
        // If its call is never held, the test times out inside the wait below, where no finally runs:
        // end the rollout then too, so it does not outlive the test and write into the folder afterAll removes.
        onTestFinished(() => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        });
        try {
          await first.held();
          child.kill('SIGINT');
        } finally {
          first.release();
        }
        expect(await exited).toBe(1);
        const listed = JSON.parse((await polar(['rollouts', '--db', db, '--json'])).stdout).rollouts;
        expect(listed[0]).toMatchObject({ status: 'interrupted' });
        const rolloutId: string = listed[0].rolloutId;
        expect(first.calls.every((c) => c.path === '/v1/completions')).toBe(true);

        const resumed = await polar(['rollout', '--resume', rolloutId, '--upstream', moved.url, '--db', db, '--json']);
        expect(resumed.code, resumed.stderr).toBe(0);
        expect(JSON.parse(resumed.stdout)).toMatchObject({ status: 'completed', outcomes: { completed: 4 } });
        // The resumed samples went to the moved server, token in (not to its chat endpoint).
        expect(moved.calls.length).toBeGreaterThan(0);
        expect(new Set(moved.calls.map((c) => c.path))).toEqual(new Set(['/v1/completions']));
        const store = Store.open(db, { readonly: true });
        try {
          const samples = store.rollouts.samples(rolloutId);
          expect(samples.filter((s) => s.endedAt !== null)).toHaveLength(4);
          for (const s of samples) expect(store.sessions.get(s.sessionId!)!.metadata, s.id).toMatchObject({ tokenizer: 'bundled:qwen3' });
        } finally {
          store.close();
        }
        const verified = await polar(['verify-faithfulness', '--db', db, '--json']);
        expect(verified.code, verified.stdout).toBe(0);
        const report = JSON.parse(verified.stdout);
        expect(report.textChecked).toBe(report.sessions);
      } finally {
        await first.close();
        await moved.close();
      }
    },
    patient(120_000),
  );
});

describe('a group with a sample that ended error', () => {
  let db: string;
  let rolloutId: string;
  let code: number;
  beforeAll(async () => {
    // Rewards 1, 0, then an evaluation polar cannot make, by the order in which the evaluator runs
    // (one at a time): the `tests` evaluator's fresh copy of the workspace, whose setup fails the
    // third time it runs there. That is the task's (or the machine's) failure, so the sample ends
    // error; a verifier killed after the agent ran would score 0 instead.
    const counter = path.join(bench.dir, 'mixed-counter');
    const setupCounter = path.join(bench.dir, 'mixed-setup-counter');
    const tasks = bench.taskFile('mixed.jsonl', [
      {
        id: 'mix',
        prompt: 'calls=1',
        setup: [`case "$PWD" in */scratch/eval-*) n=$(cat ${setupCounter} 2>/dev/null || echo 0); echo $((n+1)) > ${setupCounter}; [ "$n" -lt 2 ];; esac`],
        evaluator: { type: 'tests', pass_to_pass: [`n=$(cat ${counter} 2>/dev/null || echo 0); echo $((n+1)) > ${counter}; [ "$n" -eq 0 ]`] },
      },
    ]);
    db = path.join(bench.dir, 'mixed.db');
    const r = await polar([...bench.args(tasks, db, ['--samples', '3', '--post-workers', '1', '--accept', 'reward>=1', ...TITO]), '--json']);
    code = r.code;
    const summary = JSON.parse(r.stdout);
    rolloutId = summary.rolloutId;
    // polar's statistics: the error sample takes no part (a group of two, mean 0.5).
    expect(summary.groups[0]).toMatchObject({ mean: 0.5 });
    expect([...summary.groups[0].rewards].sort()).toEqual([0, 1, null]);
  }, patient(120_000));

  it('the rollout exits 0: not every sample errored', () => {
    expect(code).toBe(0);
  });

  it('--format nemo-gym writes no reward-0 row for it: the Gym group is [1, 0] as polar counts it, and the export says it left one out', async () => {
    const r = await polar(['export', '--db', db, '--rollout', rolloutId, '--format', 'nemo-gym']);
    expect(r.code, r.stderr).toBe(0);
    const rows = lines(r.stdout);
    expect(rows.map((row) => row.reward).sort()).toEqual([0, 1]);
    expect(r.stderr).toMatch(/export nemo-gym: 2 written, 1 left out: 1 unrewarded sample/);
    expect(r.stderr).toMatch(/left out 1: rollout sample without a reward \(it ended error\): polar's group statistics leave it out/);
  });

  it('--accepted says the error sample was never judged, not that the rollout ran without --accept', async () => {
    const r = await polar(['export', '--db', db, '--rollout', rolloutId, '--format', 'sft', '--accepted']);
    expect(r.code, r.stderr).toBe(0);
    expect(lines(r.stdout)).toHaveLength(1);
    expect(r.stderr).toMatch(/left out 1: not accepted \(--accepted\)/);
    expect(r.stderr).toMatch(/left out 1: not judged: the sample ended error without a reward, so rollout rol_\w+'s --accept 'reward>=1' never judged it/);
    expect(r.stderr).not.toMatch(/ran without --accept/);
  });

  it(
    'reconstruct and verify-faithfulness leave a polar replay session out unless --include-replays, and say how many',
    async () => {
      const store = Store.open(db, { readonly: true });
      const [sample] = store.rollouts.samples(rolloutId);
      store.close();
      const replay = await polar(['replay', sample!.sessionId!, ...nodeAgentHarness(bench.agent), '--db', db, '--json']);
      expect(replay.code, replay.stdout + replay.stderr).toBe(0);
      const { replaySession } = JSON.parse(replay.stdout) as { replaySession: string };

      const plain = await polar(['reconstruct', '--db', db]);
      expect(plain.code, plain.stderr).toBe(0);
      expect(lines(plain.stdout).map((t) => t.session_id)).not.toContain(replaySession);
      expect(plain.stderr).toMatch(/left out 1 session recorded by polar replay \(played back, not sampled; --include-replays keeps it\)/);
      const all = await polar(['reconstruct', '--db', db, '--include-replays']);
      expect(lines(all.stdout).map((t) => t.session_id)).toContain(replaySession);
      expect(all.stderr).not.toMatch(/recorded by polar replay/);

      const verified = await polar(['verify-faithfulness', '--db', db, '--json']);
      expect(verified.code, verified.stdout).toBe(0);
      const withReplays = await polar(['verify-faithfulness', '--db', db, '--json', '--include-replays']);
      expect(JSON.parse(verified.stdout)).toMatchObject({ replaySessionsLeftOut: 1, sessions: JSON.parse(withReplays.stdout).sessions - 1 });
      expect(JSON.parse(withReplays.stdout)).toMatchObject({ replaySessionsLeftOut: 0 });
      const text = await polar(['verify-faithfulness', '--db', db]);
      expect(text.stderr).toMatch(/left out 1 session recorded by polar replay/);
    },
    patient(120_000),
  );
});

describe('an evaluator killed after the agent ran', () => {
  it(
    'scores 0 with the reason and stays in its group (not error), counted as forfeited',
    async () => {
      // The agent's code, run by the checker, could have killed it: that may neither earn the reward
      // file it left nor drop the sample out of its group as `error`.
      const tasks = bench.taskFile('killed.jsonl', [{ id: 'crash', prompt: 'calls=1', evaluator: { type: 'command', command: 'echo 1; kill -SEGV $$' } }]);
      const db = path.join(bench.dir, 'killed.db');
      const r = await polar([...bench.args(tasks, db, ['--samples', '2']), '--json']);
      expect(r.code, r.stderr).toBe(0);
      const summary = JSON.parse(r.stdout) as { outcomes: Record<string, number>; forfeited: number; groups: { rewards: (number | null)[] }[] };
      expect(summary.outcomes).toMatchObject({ completed: 2, error: 0 });
      expect(summary.forfeited).toBe(2);
      expect(summary.groups[0]!.rewards).toEqual([0, 0]);
      const store = Store.open(db, { readonly: true });
      const [sample] = store.rollouts.samples(store.rollouts.list()[0]!.id);
      store.close();
      expect(sample!.evaluator?.forfeit).toMatch(/the evaluator command (was killed by SIGSEGV|exited 139: killed by SIGSEGV)/);
    },
    patient(120_000),
  );
});

describe('a rollout whose every sample ended error', () => {
  it(
    'exits 3 and says so, in the summary and in --json',
    async () => {
      // A setup command that fails: the task's (or the machine's) fault, before any agent ran.
      const tasks = bench.taskFile('all-error.jsonl', [{ id: 'crash', prompt: 'calls=1', setup: ['exit 3'], evaluator: { type: 'session-completed' } }]);
      const db = path.join(bench.dir, 'all-error.db');
      const r = await polar(bench.args(tasks, db, ['--samples', '2']));
      expect(r.code, r.stderr).toBe(3);
      expect(r.stdout).toMatch(/outcomes: 0 completed, 0 failed, 0 timeout, 2 error/);
      expect(r.stdout).toMatch(/every sample ended error: no reward to learn from \(exit 3\); the causes are in the error column of .* rollout show rol_/);
      const json = await polar([...bench.args(tasks, path.join(bench.dir, 'all-error-json.db'), ['--samples', '1']), '--json']);
      expect(json.code).toBe(3);
      expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, status: 'completed', problem: expect.stringMatching(/^every sample ended error/) });
      const help = await polar(['rollout', '--help']);
      expect(help.stdout).toMatch(/\n3 when it completed but every sample ended error/);
    },
    patient(120_000),
  );
});
