import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { mockTasksFrom } from '../../src/mock-server/tasks.js';
import { readTaskFile } from '../../src/rollout/task-file.js';
import { Store } from '../../src/store/store.js';
import { gymRows } from '../../src/train/gym-agent/wiring.js';
import { batchAdvantages, gymResultSample } from '../../src/train/nemo-rl/advantages.js';
import { contiguityProblems, gymResultProblems } from '../support/nemo-gym-schema.js';
import { gymAgentArgs, startPolarServer } from './support.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * `polar gym-agent` under NeMo-RL's contract, with real harnesses against a stand-in for NeMo-RL's
 * vLLM HTTP server (the mock in --nemo-rl mode: sampling asserts, token fields only unstreamed, prefix
 * splicing). Each `/run` row is a Gym dataset row as `polar train` writes them, with NeMo-RL's
 * additions (temperature, top_p, _rowidx). Every answer must validate against Gym's models, pass
 * NeMo-RL's contiguity rule, and carry the evaluator's reward.
 */
const TASKS = path.resolve(__dirname, '../../fixtures/tasks/tasks.jsonl');
const tasks = readTaskFile(TASKS).filter((t) => ['create-greeting', 'js-sum', 'py-stats-empty'].includes(t.id));
let mock: MockServer;
let dir: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  mock = await startMockServer({ tasks: mockTasksFrom(tasks), seed: 5, nemoRl: { temperature: 1, topP: 1 } });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-gym-agent-'));
});
afterAll(async () => {
  for (const c of children) c.kill('SIGTERM');
  await mock?.close();
  removeTree(dir);
});

async function startAgent(harness: string, db: string): Promise<string> {
  const { json } = await startPolarServer(gymAgentArgs(['--harness', harness], mock, db, TASKS, path.join(dir, `out-${harness}`)), children);
  return json.url as string;
}

describe.each(['claude-code', 'codex'])('polar gym-agent --harness %s', (harness) => {
  let url: string;
  const db = () => path.join(dir, `${harness}.db`);
  beforeAll(async () => {
    url = await startAgent(harness, db());
  }, patient(60_000));

  it("answers GET / (Gym's readiness check) and /aggregate_metrics", async () => {
    expect(await (await fetch(`${url}/`)).json()).toMatchObject({ status: 'ok' });
    const agg = await (
      await fetch(`${url}/aggregate_metrics`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ verify_responses: [{ reward: 1 }, { reward: 0 }] }),
      })
    ).json();
    expect(agg).toEqual({ group_level_metrics: [], agent_metrics: { samples: 2, mean_reward: 0.5 }, key_metrics: { mean_reward: 0.5 } });
  });

  it(
    "each /run row is one session: Gym-valid, append-only, token fields on each call's last item, the evaluator's reward",
    async () => {
      // One GRPO group per task (2 samples), all posted at once, as NeMo-RL does.
      const rows = gymRows(tasks)
        .trim()
        .split('\n')
        .flatMap((l) => [JSON.parse(l), JSON.parse(l)])
        .map((row, i) => ({
          ...row,
          responses_create_params: { ...row.responses_create_params, temperature: 1, top_p: 1, max_output_tokens: 4096 },
          _rowidx: i,
        }));
      const results: Record<string, any>[] = await Promise.all(
        rows.map(
          async (row) =>
            (await fetch(`${url}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(row) })).json() as Promise<
              Record<string, any>
            >,
        ),
      );
      const store = Store.open(db(), { readonly: true });
      try {
        results.forEach((r, i) => {
          expect(gymResultProblems(r), JSON.stringify(r).slice(0, 400)).toEqual([]);
          expect(contiguityProblems(r)).toEqual([]);
          expect(r.instance_config, r.polar_mask_reason).toBeUndefined();
          expect(r.responses_create_params).toEqual(rows[i]!.responses_create_params);
          const sample = store.rollouts.sampleForSession(r.polar_session_id)!;
          expect(sample.taskId).toBe(rows[i]!.task_id);
          expect(r.reward).toBe(sample.reward);
          // The token items are exactly the session's main-agent calls, in order.
          const items = r.response.output.filter((o: Record<string, unknown>) => Array.isArray(o.generation_token_ids));
          const calls = store.requests.list(r.polar_session_id).filter((c) => c.status === 'ok' && c.agentId === 'main');
          expect(items.length).toBe(r.polar_calls);
          expect(items.length).toBe(calls.length);
          items.forEach((item: Record<string, unknown>, k: number) => expect(item.generation_token_ids).toEqual(store.requests.get(calls[k]!.id)!.sampledIds));
        });
      } finally {
        store.close();
      }
      // The mock alternates correct and wrong solutions per task: each group of two has both rewards.
      for (let g = 0; g < results.length; g += 2) expect(new Set([results[g]!.reward, results[g + 1]!.reward]).size).toBe(2);
      // NeMo-RL groups by first-prompt token ids (issue 30): both samples of a task answer one first
      // prompt, the agent's live check finds no split, and NeMo-RL's rule gives each group of two
      // with rewards {0, 1} advantages ±1 (leave-one-out in a pair: the other's reward, std 0).
      expect(results.map((r) => [r.polar_first_prompt_split, r.polar_first_prompt_unchecked])).toEqual(results.map(() => [0, 0]));
      const adv = batchAdvantages(
        results.map((r) => gymResultSample(r as never)!),
        { leaveOneOut: true, normalize: true },
      );
      expect(adv.groupSizes).toEqual(tasks.map(() => 2));
      expect(adv.advantages.map(Math.abs)).toEqual(results.map(() => 1));
    },
    patient(240_000),
  );

  it('a row naming no task of its --tasks file, or defining one inline, is refused 400 (a misconfiguration, not a masked sample)', async () => {
    const post = (row: unknown) => fetch(`${url}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(row) });
    const unknown = await post({ responses_create_params: { input: 'x' }, task_id: 'no-such-task' });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error: { message: string } }).error.message).toMatch(/unknown task_id "no-such-task"/);
    const inline = await post({
      responses_create_params: { input: 'x' },
      task: { id: 'bad', workspace: { empty: true }, setup: ['touch /tmp/x'], evaluator: { type: 'session-completed' } },
    });
    expect(inline.status).toBe(400);
  });
});
