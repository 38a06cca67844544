import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import { POLAR_BIN, polarCli } from '../support/polar-cli.js';
import { countedEvaluator, startRolloutBench, type RolloutBench } from '../support/agent-rollout.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { waitUntil } from '../support/wait.js';

/**
 * `polar rollout` with a small real agent (the custom harness) whose behaviour the task prompt
 * picks, so each lifecycle case is exact: groups and rewards, a crash and a resume, a hang past the
 * budget, a broken evaluator, bad task files, and the sandbox.
 */

let bench: RolloutBench;

beforeAll(async () => {
  bench = await startRolloutBench('polar-rollout-');
});
afterAll(() => bench?.close());

const polar = (args: string[]) => polarCli(args, { timeout: patient(120_000) });

function open(db: string): Store {
  return Store.open(db, { readonly: true });
}

describe('polar rollout', () => {
  it('tasks × N samples become groups: rewards from the evaluator, GRPO and leave-one-out advantages, exports that carry them', async () => {
    const tasks = bench.taskFile('groups.jsonl', [
      // The reward is the agent's answer, so each sample's reward is known: 1 and 0 alternate by sample.
      { id: 'alpha', prompt: 'calls=2 write:answer.txt:1' },
      { id: 'beta', prompt: 'calls=1 write:answer.txt:0.25' },
    ]);
    const db = path.join(bench.dir, 'groups.db');
    const r = await polar([...bench.args(tasks, db, ['--samples', '3', '--accept', 'reward>=1']), '--json']);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout);
    expect(summary).toMatchObject({
      ok: true,
      status: 'completed',
      tasks: 2,
      samplesPerTask: 3,
      outcomes: { completed: 6, error: 0 },
      accepted: 3,
      attempted: 6,
    });
    const store = open(db);
    try {
      const samples = store.rollouts.samples(summary.rolloutId);
      expect(samples.map((s) => s.reward)).toEqual([1, 1, 1, 0.25, 0.25, 0.25]);
      // Each sample is one session with its calls captured exactly.
      for (const s of samples) {
        expect(store.sessions.get(s.sessionId!)).toMatchObject({ status: 'completed', harness: 'custom' });
        expect(store.requests.list(s.sessionId!)).toHaveLength(s.taskId === 'alpha' ? 2 : 1);
        expect(s.evaluator).toMatchObject({ type: 'command', exit_code: 0 });
        expect(s.timing.init_ms).toBeGreaterThanOrEqual(0);
      }
      const groups = store.rollouts.groups(summary.rolloutId);
      expect(groups.map((g) => [g.taskId, g.samples, g.mean, g.std, g.accepted])).toEqual([
        ['alpha', 3, 1, 0, 3],
        ['beta', 3, 0.25, 0, 0],
      ]);
    } finally {
      store.close();
    }
    const exported = await polar(['export', '--db', db, '--rollout', summary.rolloutId, '--format', 'tokens']);
    const traces = exported.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    // alpha's two calls are separate conversations, so two traces per session; each carries the sample's reward.
    expect(traces).toHaveLength(9);
    for (const t of traces) {
      expect(t).toMatchObject({ rollout_id: summary.rolloutId, group_id: `${summary.rolloutId}/${t.task_id}`, partial: false, advantage: 0 });
      expect(t.reward).toBe(t.task_id === 'alpha' ? 1 : 0.25);
    }
    const accepted = await polar(['export', '--db', db, '--rollout', summary.rolloutId, '--format', 'sft', '--accepted']);
    expect(accepted.stdout.trim().split('\n')).toHaveLength(6); // alpha's three accepted sessions, two traces each
    expect(accepted.stderr).toMatch(/left out 3: not accepted \(--accepted\)/);
  });

  it('token in: every session of the rollout names its tokenizer, so verify-faithfulness checks every one against its text', async () => {
    const tasks = bench.taskFile('tito.jsonl', [
      { id: 'one', prompt: 'calls=2 write:answer.txt:1' },
      { id: 'two', prompt: 'calls=1 write:answer.txt:0' },
    ]);
    const db = path.join(bench.dir, 'tito.db');
    const r = await polar([...bench.args(tasks, db, ['--samples', '2', '--upstream-kind', 'vllm-tito', '--tokenizer', 'bundled:qwen3']), '--json']);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout);
    const store = open(db);
    try {
      const samples = store.rollouts.samples(summary.rolloutId);
      expect(samples).toHaveLength(4);
      // Each sample's session was made by the rollout before its first call, not by the proxy.
      for (const s of samples) {
        expect(store.requests.list(s.sessionId!).length).toBeGreaterThan(0);
        expect(store.sessions.get(s.sessionId!)!.metadata).toMatchObject({ rollout_id: summary.rolloutId, tokenizer: 'bundled:qwen3' });
      }
      for (const s of store.sessions.list()) expect(s.metadata.tokenizer, s.id).toBe('bundled:qwen3');
    } finally {
      store.close();
    }
    const verified = await polar(['verify-faithfulness', '--db', db, '--json']);
    expect(verified.code, verified.stdout).toBe(0);
    const report = JSON.parse(verified.stdout);
    // The four samples; the rollout's unattributed session is made only if a call lands there.
    expect(report.sessions).toBe(4);
    expect(report.textChecked).toBe(report.sessions);
  });

  it('without --out a finished rollout leaves no folder in the temp folder, and no empty unattributed session', async () => {
    const tasks = bench.taskFile('no-out.jsonl', [{ id: 'one', prompt: 'calls=1 write:answer.txt:1' }]);
    const db = path.join(bench.dir, 'no-out.db');
    const args = bench.args(tasks, db, ['--samples', '2', '--json']);
    args.splice(args.indexOf('--out'), 2);
    const r = await polar(args);
    expect(r.code, r.stderr).toBe(0);
    const { rolloutId } = JSON.parse(r.stdout) as { rolloutId: string };
    expect(fs.existsSync(path.join(os.tmpdir(), `polar-${rolloutId}`))).toBe(false);
    const store = open(db);
    try {
      expect(
        store.sessions
          .list()
          .map((s) => s.id)
          .filter((id) => id.endsWith('-unattributed')),
      ).toEqual([]);
      expect(store.sessions.list()).toHaveLength(2);
    } finally {
      store.close();
    }
  });

  it('mixed rewards give advantages that sum to zero per group', async () => {
    // Rewards 1, 0, 0.5 by the order in which the evaluator runs (one evaluation at a time).
    const counter = path.join(bench.dir, 'mixed-counter');
    const tasks = bench.taskFile('mixed.jsonl', [
      {
        id: 'mix',
        prompt: 'calls=1',
        evaluator: countedEvaluator(counter, `echo "[1,0,0.5][$n % 3]" | node -p "eval(require('fs').readFileSync(0,'utf8'))"`),
      },
    ]);
    const db = path.join(bench.dir, 'mixed.db');
    const r = await polar([...bench.args(tasks, db, ['--samples', '6', '--post-workers', '1']), '--json']);
    expect(r.code, r.stderr).toBe(0);
    const { rolloutId, groups } = JSON.parse(r.stdout);
    const g = groups[0];
    const rewards = g.rewards as number[];
    expect([...rewards].sort()).toEqual([0, 0, 0.5, 0.5, 1, 1]);
    const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    const std = Math.sqrt(rewards.reduce((a, x) => a + (x - mean) ** 2, 0) / (rewards.length - 1));
    expect(g.mean).toBeCloseTo(mean, 12);
    g.advantages.forEach((a: number, i: number) => expect(a).toBeCloseTo((rewards[i]! - mean) / (std + 1e-6), 9));
    expect(g.advantages.reduce((a: number, b: number) => a + b, 0)).toBeCloseTo(0, 9);
    expect(g.looAdvantages.reduce((a: number, b: number) => a + b, 0)).toBeCloseTo(0, 9);
    expect(rolloutId).toMatch(/^rol_/);
    // This rollout ran without --accept: --accepted finds nothing, and says why and what to do instead.
    const accepted = await polar(['export', '--db', db, '--rollout', rolloutId, '--format', 'sft', '--accepted']);
    expect(accepted.code).toBe(1);
    expect(accepted.stderr).toContain(`left out 6: none accepted: rollout ${rolloutId} ran without --accept`);
    expect(accepted.stderr).toMatch(/--min-reward R, or run the rollout again with --accept/);
    expect(accepted.stderr).not.toMatch(/not a rollout sample/);
    const byReward = await polar(['export', '--db', db, '--rollout', rolloutId, '--format', 'sft', '--min-reward', '1']);
    expect(byReward.stdout.trim().split('\n')).toHaveLength(2);
  });

  it('a harness that hangs past its budget: its process tree ends, its calls are kept, its traces are partial', async () => {
    // The agent makes its call, then sleeps far past the budget and would touch `survived` if it
    // woke: the budget (long enough for the call on a busy machine) is what ends it, never the sleep.
    const survived = path.join(bench.dir, 'hang-survived');
    const tasks = bench.taskFile('hang.jsonl', [
      { id: 'hang', prompt: `calls=1 sleep:63.5 touch:${survived}`, timeout: patientSeconds(3), evaluator: { type: 'session-completed' } },
    ]);
    const db = path.join(bench.dir, 'hang.db');
    const r = await polar([...bench.args(tasks, db, ['--samples', '1']), '--json']);
    const summary = JSON.parse(r.stdout);
    expect(summary.outcomes).toMatchObject({ timeout: 1 });
    const store = open(db);
    try {
      const [sample] = store.rollouts.samples(summary.rolloutId);
      expect(sample).toMatchObject({ status: 'timeout', reward: 0 });
      expect(store.sessions.get(sample!.sessionId!)!.status).toBe('timeout');
      expect(store.requests.list(sample!.sessionId!)).toEqual([expect.objectContaining({ status: 'ok' })]);
    } finally {
      store.close();
    }
    // The tree is ended with SIGTERM, then SIGKILL after a grace period: once it is gone, the agent
    // never woke from its sleep to touch the file (which a tree left running would, at 63.5 s).
    const alive = () => /sleep:63\.5/.test(execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }));
    await waitUntil("the hung harness's process tree to end", () => !alive());
    expect(fs.existsSync(survived)).toBe(false);
    const plain = await polar(['export', '--db', db, '--rollout', summary.rolloutId]);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/left out 1: partial: session timeout \(--include-partial keeps it\)/);
    const partial = await polar(['export', '--db', db, '--rollout', summary.rolloutId, '--include-partial']);
    expect(JSON.parse(partial.stdout.trim())).toMatchObject({ partial: true, status: 'timeout', reward: 0 });
  });

  it('an evaluator that crashes or times out scores 0 with the reason (the agent could have caused it); its samples stay in their groups', async () => {
    const tasks = bench.taskFile('broken.jsonl', [
      { id: 'crash', prompt: 'calls=1', evaluator: { type: 'command', command: 'echo 1; kill -SEGV $$' } },
      { id: 'slow', prompt: 'calls=1', evaluator: { type: 'command', command: 'echo 1; sleep 20', timeout: 1 } },
    ]);
    const db = path.join(bench.dir, 'broken.db');
    const r = await polar([...bench.args(tasks, db, ['--samples', '2']), '--json']);
    const summary = JSON.parse(r.stdout);
    expect(summary.outcomes).toMatchObject({ error: 0, completed: 4 });
    expect(summary.forfeited).toBe(4);
    const store = open(db);
    try {
      const samples = store.rollouts.samples(summary.rolloutId);
      for (const s of samples) {
        // The "1" each printed first is not read: a run cut short says nothing in the agent's favour.
        expect(s).toMatchObject({ status: 'completed', reward: 0, error: null });
        expect(s.evaluator?.forfeit).toMatch(s.taskId === 'crash' ? /killed by SIGSEGV/ : /timed out after 1 s/);
      }
      expect(store.rollouts.groups(summary.rolloutId).map((g) => [g.taskId, g.samples, g.rewarded])).toEqual([
        ['crash', 2, 2],
        ['slow', 2, 2],
      ]);
    } finally {
      store.close();
    }
  });

  it('bad task files are refused with the line and field, and nothing starts', async () => {
    const bad = path.join(bench.dir, 'bad.jsonl');
    fs.writeFileSync(
      bad,
      [
        JSON.stringify({ id: 'a', prompt: 'x', workspace: { empty: true }, evaluator: { type: 'session-completed' } }),
        JSON.stringify({ id: 'b', workspace: { empty: true }, evaluator: { type: 'session-completed' } }),
        JSON.stringify({ id: 'c', prompt: 'x', workspace: { empty: true }, evaluator: { type: 'llm-judge' } }),
        JSON.stringify({ id: 'd', prompt: 'x', workspace: { dir: 'no/such/folder' }, evaluator: { type: 'session-completed' } }),
        JSON.stringify({ id: 'a', prompt: 'x', workspace: { empty: true }, evaluator: { type: 'session-completed' } }),
      ].join('\n'),
    );
    const db = path.join(bench.dir, 'bad.db');
    const r = await polar(bench.args(bad, db, ['--samples', '2']));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/line 2, field "prompt": required/);
    expect(r.stderr).toMatch(/line 3, field "evaluator.type": unknown evaluator "llm-judge"/);
    expect(r.stderr).toMatch(/line 4, field "workspace.dir": no such folder/);
    expect(r.stderr).toMatch(/line 5, field "id": duplicate id "a" \(first on line 1\)/);
    expect(fs.existsSync(db)).toBe(false);
  });

  it(
    'kill -9 mid-rollout, then --resume: every task ends with exactly N samples, and no sample is run or rewarded twice',
    async () => {
      const tasks = bench.taskFile('crash.jsonl', [
        { id: 't1', prompt: 'calls=1 sleep:0.4 write:answer.txt:1' },
        { id: 't2', prompt: 'calls=1 sleep:0.4 write:answer.txt:0' },
        { id: 't3', prompt: 'calls=1 sleep:0.4 write:answer.txt:0.5' },
      ]);
      const db = path.join(bench.dir, 'crash.db');
      const child = spawn(process.execPath, [POLAR_BIN, ...bench.args(tasks, db, ['--samples', '4', '--concurrency', '2'])], { stdio: 'ignore' });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      // Wait until some samples have ended, then kill it mid-flight (and if the wait fails, still kill
      // it, so it does not write into the folder afterAll removes).
      let before: { id: string; sessionId: string | null; reward: number | null; endedAt: number | null }[] = [];
      const midFlight = (): boolean => {
        if (!fs.existsSync(db)) return false;
        // The rollout creates the file before its schema: until then it is not a polar database yet.
        let store: Store;
        try {
          store = open(db);
        } catch (err) {
          if (/not a polar database yet/.test(String(err))) return false;
          throw err;
        }
        try {
          const rollout = store.rollouts.list()[0];
          const samples = rollout ? store.rollouts.samples(rollout.id) : [];
          const ended = samples.filter((s) => s.endedAt !== null);
          // Killed while a harness runs: a running sample whose session row is already there (a sample
          // is marked running a moment before its session is made; killed in between, no session is
          // left to mark interrupted).
          const midRun = samples.some((s) => s.status === 'running' && s.sessionId !== null && store.sessions.get(s.sessionId)?.status === 'active');
          if (ended.length < 3 || !midRun) return false;
          child.kill('SIGKILL');
          before = ended.map((s) => ({ id: s.id, sessionId: s.sessionId, reward: s.reward, endedAt: s.endedAt }));
          return true;
        } finally {
          store.close();
        }
      };
      try {
        await waitUntil('three samples ended and one mid-run', midFlight, {
          stopIf: () => (child.exitCode !== null ? `the rollout exited (${child.exitCode}) before that` : null),
          timeoutMs: 90_000,
          everyMs: 100,
        });
      } finally {
        // If the wait failed, still kill it, so it does not write into the folder afterAll removes.
        child.kill('SIGKILL');
      }
      await exited;
      expect(before.length).toBeGreaterThanOrEqual(3);
      const listed = await polar(['rollouts', '--db', db, '--json']);
      const [rollout] = JSON.parse(listed.stdout).rollouts;
      expect(rollout.status).toBe('interrupted');
      expect(rollout.outcomes.completed).toBeLessThan(12);
      const endedBefore = rollout.outcomes.completed + rollout.outcomes.failed + rollout.outcomes.timeout + rollout.outcomes.error;
      // kill -9 removed nothing: the attempts it cut short left their workspaces.
      const workspaces = path.join(bench.dir, 'out-crash.db', 'workspaces');
      const cutShort = fs.readdirSync(workspaces).filter((d) => /-a1$/.test(d));
      expect(cutShort.length).toBeGreaterThan(0);
      // As a kill between removeWorkspace's steps leaves one: the workspace gone, its baseline copy not.
      fs.rmSync(path.join(workspaces, cutShort[0]!), { recursive: true, force: true });
      fs.mkdirSync(path.join(workspaces, `${cutShort[0]!}-baseline.git`), { recursive: true });

      const resumed = await polar(['rollout', '--resume', rollout.rolloutId, '--db', db, '--json']);
      expect(resumed.code, resumed.stderr).toBe(0);
      const summary = JSON.parse(resumed.stdout);
      expect(summary).toMatchObject({ status: 'completed', outcomes: { completed: 12 } });
      // The resume's rate counts only what it ended, over its own time.
      expect(summary.endedHere).toBe(12 - endedBefore);
      expect(summary.sessionsPerMinute).toBeCloseTo((summary.endedHere / summary.durationMs) * 60_000, 6);
      // Nothing is left of the cut-short attempts, nor of the resume's own (no --keep-workspaces).
      // (A finished rollout also removes its output folders once they are empty.)
      expect(fs.existsSync(workspaces) ? fs.readdirSync(workspaces) : []).toEqual([]);
      const store = open(db);
      try {
        const samples = store.rollouts.samples(rollout.rolloutId);
        expect(samples).toHaveLength(12);
        for (const task of ['t1', 't2', 't3']) expect(samples.filter((s) => s.taskId === task && s.status === 'completed')).toHaveLength(4);
        // Samples that had ended before the kill were not run again: same session, same reward, same end.
        for (const b of before) expect(samples.find((s) => s.id === b.id)).toMatchObject({ sessionId: b.sessionId, reward: b.reward, endedAt: b.endedAt });
        // The interrupted attempts' sessions are labelled; the samples that ran again have a new attempt.
        const retried = samples.filter((s) => s.attempt > 1);
        expect(retried.length).toBeGreaterThan(0);
        expect(new Set(samples.map((s) => s.sessionId)).size).toBe(12);
        expect(store.sessions.list().filter((s) => s.status === 'interrupted').length).toBeGreaterThan(0);
        expect(store.rollouts.groups(rollout.rolloutId).map((g) => g.samples)).toEqual([4, 4, 4]);
      } finally {
        store.close();
      }
    },
    patient(120_000),
  );

  it.skipIf(!findBwrap())('--sandbox bwrap: a command writing outside the workspace fails inside the sandbox and succeeds with none', async () => {
    // Outside /tmp, which the sandbox replaces with a private one; the custom harness's script is
    // made visible (read-only) with --sandbox-ro, as a user would.
    const outside = fs.mkdtempSync(path.join(path.resolve(__dirname, '..'), '.sandbox-probe-'));
    try {
      const boxedAgent = path.join(outside, 'agent.mjs');
      fs.copyFileSync(bench.agent, boxedAgent);
      const target = path.join(outside, 'escaped.txt');
      const tasks = bench.taskFile('sandbox.jsonl', [{ id: 'escape', prompt: `calls=1 touch:${target}`, evaluator: { type: 'session-completed' } }]);
      const args = bench.args(tasks, path.join(bench.dir, 'boxed.db'), ['--samples', '1']).map((a) => a.replace(bench.agent, boxedAgent));
      const boxed = await polar([
        ...args.slice(0, args.indexOf('--sandbox')),
        ...args.slice(args.indexOf('--sandbox') + 2),
        '--sandbox',
        'bwrap',
        '--sandbox-ro',
        boxedAgent,
        '--json',
      ]);
      const summary = JSON.parse(boxed.stdout);
      // A checkout under /tmp puts the probe folder in the sandbox's private /tmp: the write succeeds
      // there (and never reaches the host, checked below); elsewhere it fails on the read-only root.
      const privateTmp = ['/tmp/', '/var/tmp/'].some((t) => outside.startsWith(t));
      // The agent ran (its model call is captured), then its write outside the workspace failed.
      expect(summary.groups[0].rewards).toEqual([privateTmp ? 1 : 0]);
      const store = open(path.join(bench.dir, 'boxed.db'));
      try {
        const [sample] = store.rollouts.samples(summary.rolloutId);
        expect(store.requests.list(sample!.sessionId!)).toEqual([expect.objectContaining({ status: 'ok' })]);
        if (!privateTmp)
          expect(fs.readFileSync(store.sessions.get(sample!.sessionId!)!.metadata.log_file as string, 'utf8')).toMatch(/EROFS|read-only file system/i);
      } finally {
        store.close();
      }
      expect(fs.existsSync(target)).toBe(false);
      const open_ = await polar([...bench.args(tasks, path.join(bench.dir, 'open.db'), ['--samples', '1']), '--json']);
      expect(JSON.parse(open_.stdout).groups[0].rewards).toEqual([1]);
      expect(fs.existsSync(target)).toBe(true);
    } finally {
      removeTree(outside);
    }
  });

  it("rollout show fills a failed sample's error column from the last meaningful line of its harness log, in the table and in --json", async () => {
    // The harness says why on stderr and exits 1: the sample ends failed with no error of its own,
    // the reason only in .polar/runs/<session>/harness.log.
    const tasks = bench.taskFile('show-log.jsonl', [
      { id: 'broken', prompt: 'calls=1 say:fatal:_could_not_open_the_workspace_config say:cleaning_up fail', evaluator: { type: 'session-completed' } },
    ]);
    const db = path.join(bench.dir, 'show-log.db');
    const r = await polar([...bench.args(tasks, db, ['--samples', '1']), '--json']);
    const summary = JSON.parse(r.stdout);
    expect(summary.outcomes, r.stderr).toMatchObject({ failed: 1 });

    const json = JSON.parse((await polar(['rollout', 'show', summary.rolloutId, '--db', db, '--json'])).stdout);
    const [sample] = json.samples;
    expect(sample).toMatchObject({ status: 'failed', error: null });
    expect(sample.harnessLog.tail).toEqual(['fatal: could not open the workspace config']);
    expect(sample.harnessLog.file).toBe(path.join(bench.dir, '.polar', 'runs', sample.sessionId, 'harness.log'));

    const text = await polar(['rollout', 'show', summary.rolloutId, '--db', db]);
    expect(text.code, text.stderr).toBe(0);
    const row = text.stdout.split('\n').find((l) => l.includes(sample.sessionId));
    expect(row).toMatch(/failed .* harness\.log: fatal: could not open the workspace config$/);
  });
});
