import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnvironment } from '../../src/harness/env.js';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { mockTasksFrom } from '../../src/mock-server/tasks.js';
import { scoreOnHost } from '../support/score.js';
import { readTaskFile } from '../../src/rollout/task-file.js';
import { applyDiff, prepareWorkspace, removeWorkspace } from '../../src/rollout/workspace.js';
import { Store } from '../../src/store/store.js';
import { countColour, dumpDom, findChromium, screenshot } from '../support/chromium.js';
import { BIN, expectSessionCapturedExactly } from './support.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Real harness CLIs through `polar rollout` on the fixture tasks against the mock model, whose
 * scripted correct and wrong solutions alternate per task: every group has mixed rewards; each
 * reward is what the task's evaluator gives the captured diff when it is applied to a fresh copy
 * again; GRPO advantages sum to zero per group; every call is captured exactly; exports carry the
 * rollout's fields. The sandbox is the default one (bubblewrap where installed).
 */
const run = promisify(execFile);
const TASKS = path.resolve(__dirname, '../../fixtures/tasks/tasks.jsonl');
const tasks = readTaskFile(TASKS);
const chromium = findChromium();
let mock: MockServer;
let dir: string;

beforeAll(async () => {
  mock = await startMockServer({ tasks: mockTasksFrom(tasks), seed: 7 });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-rollout-'));
});
afterAll(async () => {
  await mock?.close();
  removeTree(dir);
});

describe.each([
  { harness: 'claude-code', samples: 4 },
  { harness: 'codex', samples: 2 },
])('polar rollout --harness $harness × $samples on the fixture tasks', ({ harness, samples }) => {
  const db = () => path.join(dir, `${harness}.db`);
  let summary: { rolloutId: string; status: string; groups: { taskId: string; rewards: number[]; advantages: number[] }[]; outcomes: Record<string, number> };

  beforeAll(async () => {
    const { stdout } = await run(
      process.execPath,
      [
        BIN,
        'rollout',
        '--tasks',
        TASKS,
        '--harness',
        harness,
        '--upstream',
        mock.url,
        '--samples',
        String(samples),
        '--db',
        db(),
        '--accept',
        'reward>=1',
        '--json',
      ],
      {
        env: { ...process.env, NO_COLOR: '1' },
        timeout: patient(280_000),
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    summary = JSON.parse(stdout);
  }, patient(300_000));

  it('every sample completes, every group has mixed rewards, and advantages sum to zero per group', () => {
    expect(summary.status).toBe('completed');
    expect(summary.outcomes.completed).toBe(tasks.length * samples);
    expect(summary.groups).toHaveLength(tasks.length);
    for (const g of summary.groups) {
      expect(new Set(g.rewards).size, `${g.taskId}: ${g.rewards}`).toBeGreaterThan(1);
      expect(g.advantages.reduce((a, b) => a + b, 0)).toBeCloseTo(0, 9);
    }
  });

  it(
    'each reward is what the evaluator gives the captured diff on a fresh copy; each call is captured exactly',
    async () => {
      const store = Store.open(db(), { readonly: true });
      const rows = store.rollouts.samples(summary.rolloutId);
      store.close();
      for (const s of rows) {
        const task = tasks.find((t) => t.id === s.taskId)!;
        const env = baseEnvironment();
        const ws = await prepareWorkspace(task, path.join(dir, `again-${harness}-${s.taskId}-${s.sampleIndex}`), Date.now() + patient(60_000), env);
        await applyDiff(ws, s.diff ?? '', env);
        const again = await scoreOnHost(task, ws, s.diff ?? '', { env, tasksDir: path.dirname(TASKS), scratch: dir, sessionId: s.sessionId! });
        await removeWorkspace(ws.dir);
        expect(again.reward, `${s.id}`).toBe(s.reward);
        expect(s.accepted).toBe(s.reward! >= 1);
        expect(expectSessionCapturedExactly(db(), s.sessionId!, mock)).toBeGreaterThanOrEqual(2);
      }
    },
    patient(120_000),
  );

  it('exports carry reward, advantage, group, task and rollout; --accepted keeps only accepted samples', async () => {
    const { stdout } = await run(process.execPath, [BIN, 'export', '--db', db(), '--rollout', summary.rolloutId], { maxBuffer: 512 * 1024 * 1024 });
    const traces = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const store = Store.open(db(), { readonly: true });
    try {
      for (const t of traces) {
        const s = store.rollouts.sampleForSession(t.session_id)!;
        expect(t).toMatchObject({
          rollout_id: summary.rolloutId,
          task_id: s.taskId,
          group_id: s.groupId,
          reward: s.reward,
          advantage: s.advantage,
          partial: false,
        });
      }
      expect(new Set(traces.map((t) => t.session_id)).size).toBe(tasks.length * samples);
      const accepted = await run(process.execPath, [BIN, 'export', '--db', db(), '--rollout', summary.rolloutId, '--format', 'sft', '--accepted'], {
        maxBuffer: 512 * 1024 * 1024,
      });
      const kept = accepted.stdout.trim().split('\n').length;
      const acceptedSamples = store.rollouts.samples(summary.rolloutId).filter((s) => s.accepted).length;
      expect(kept).toBeGreaterThanOrEqual(acceptedSamples);
      expect(kept).toBeLessThan(traces.length);
    } finally {
      store.close();
    }
  });

  it.skipIf(!chromium || harness !== 'claude-code')(
    'polar report --rollout opens in Chromium with every group and sample, their rewards and advantages, and each session',
    async () => {
      const file = path.join(dir, `rollout-${harness}.html`);
      await run(process.execPath, [BIN, 'report', '--rollout', summary.rolloutId, '--db', db(), '--tokenizer', 'bundled:qwen3', '--out', file]);
      const dom = await dumpDom(chromium!, file);
      expect(dom).toContain(`<section class="rollout" id="rollout" data-rollout="${summary.rolloutId}">`);
      const store = Store.open(db(), { readonly: true });
      const rows = store.rollouts.samples(summary.rolloutId);
      store.close();
      expect([...dom.matchAll(/<tr data-task="([^"]+)">/g)].map((m) => m[1])).toEqual(summary.groups.map((g) => g.taskId).sort());
      const shown = [...dom.matchAll(/<tr class="sample" data-sample="([^"]+)">.*?<td class="reward">([^<]*)<\/td><td class="advantage">([^<]*)<\/td>/g)].map(
        (m) => [m[1], m[2], m[3]],
      );
      expect(shown).toEqual(rows.map((r) => [r.id, String(r.reward), `${r.advantage! >= 0 ? '+' : ''}${r.advantage!.toFixed(4)}`]));
      // Each sample's session is in the file, linked from its row, with its reward on it.
      for (const r of rows) {
        expect(dom).toMatch(
          new RegExp(`<article class="session" id="([^"]+)" data-session="${r.sessionId}" data-reward="${r.reward}" data-advantage="${r.advantage}">`),
        );
        expect(dom).toMatch(new RegExp(`<a href="#[^"]+">${r.sessionId}</a>`));
      }
      const png = await screenshot(chromium!, file, path.join(dir, `rollout-${harness}.png`), 1280, 1600);
      expect(countColour(png, '#ffffff')).toBeLessThan(png.width * png.height * 0.98);
    },
    patient(120_000),
  );
});
