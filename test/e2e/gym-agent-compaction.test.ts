import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MASK_KINDS } from '../../src/rollout/sample-mask.js';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { mockTasksFrom } from '../../src/mock-server/tasks.js';
import { readTaskFile } from '../../src/rollout/task-file.js';
import { gymRows } from '../../src/train/gym-agent/wiring.js';
import { contiguityProblems } from '../support/nemo-gym-schema.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { gymAgentArgs, startPolarServer } from './support.js';

/**
 * Issue 38, measured on main 2354ad9: Claude Code through `polar gym-agent` at the 20,480-token
 * window `polar train grpo` picks for the fixture tasks sent its auto-compaction request at its 3rd
 * call, and every js-sum sample (4 calls) came back `mask_sample` ("not append-only"). With its
 * compaction off (the agent runs samples append-only), a group of 4 js-sum samples at that window
 * is 4 unmasked answers, each one chain, and every answer carries every `polar_masked_<kind>` field
 * (NeMo-RL logs the first answer's numeric keys as the step's metrics).
 */
const TASKS = path.resolve(__dirname, '../../fixtures/tasks/tasks.jsonl');
const tasks = readTaskFile(TASKS).filter((t) => t.id === 'js-sum');
let mock: MockServer;
let dir: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  mock = await startMockServer({ tasks: mockTasksFrom(tasks), seed: 5, nemoRl: { temperature: 1, topP: 1 }, maxModelLen: 20_480, log: false });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-gym-compaction-'));
});
afterAll(async () => {
  for (const c of children) c.kill('SIGTERM');
  await mock?.close();
  removeTree(dir);
});

describe('polar gym-agent --harness claude-code at a 20,480-token window', () => {
  it('a group of 4 js-sum samples: 0 of 4 masked, each one append-only chain', { timeout: patient(300_000) }, async () => {
    const db = path.join(dir, 'claude-code.db');
    const { json } = await startPolarServer(gymAgentArgs(['--harness', 'claude-code'], mock, db, TASKS, path.join(dir, 'out')), children);
    const row = JSON.parse(gymRows(tasks).trim()) as Record<string, unknown>;
    const rows = [0, 1, 2, 3].map((i) => ({
      ...row,
      responses_create_params: { ...(row.responses_create_params as object), temperature: 1, top_p: 1, max_output_tokens: 4096 },
      _rowidx: i,
    }));
    const results = await Promise.all(
      rows.map(
        async (r) =>
          (await (
            await fetch(`${json.url}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(r) })
          ).json()) as Record<string, any>,
      ),
    );
    for (const r of results) {
      expect(r.instance_config, r.polar_mask_reason).toBeUndefined();
      expect(r.polar_masked).toBe(0);
      for (const kind of MASK_KINDS) expect(r[`polar_masked_${kind}`], kind).toBe(0);
      expect(r.polar_traces).toBe(1);
      // cat, sed, then the answer: the calls past the 3rd that used to be a compaction.
      expect(r.polar_calls).toBeGreaterThanOrEqual(3);
      expect(contiguityProblems(r)).toEqual([]);
    }
    // The mock alternates correct and wrong solutions: the group has both rewards.
    expect(new Set(results.map((r) => r.reward))).toEqual(new Set([0, 1]));
  });
});
