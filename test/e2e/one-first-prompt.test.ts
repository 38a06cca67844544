import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { sampleFirstPrompt } from '../../src/rollout/first-prompts.js';
import { findBwrap } from '../../src/sandbox/index.js';
import { Store } from '../../src/store/store.js';
import { HARNESSES, harnessRolloutArgs, nodeFor, polarE2e } from './support.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Issue 30: NeMo-RL groups GRPO samples by the token ids of each sample's first prompt, so every
 * sample of a task must send the same one. Each real harness CLI runs one task × 2 samples through
 * `polar rollout` against the mock server (real Qwen3 template and tokenizer, every call answered
 * with a final text): in the bwrap sandbox the two sessions' first calls carry byte-identical prompt
 * ids as the store holds them; with `--sandbox none`, where each harness sees its own sample's
 * workspace and home folder (as every rollout did before the fixed paths), they differ.
 */
const bwrap = findBwrap();
let mock: MockServer;
let dir: string;
let tasks: string;

beforeAll(async () => {
  mock = await startMockServer({ log: false, script: () => ({ content: 'done' }) });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-first-prompt-'));
  tasks = path.join(dir, 'tasks.jsonl');
  fs.writeFileSync(
    tasks,
    `${JSON.stringify({ id: 'greet', prompt: 'Reply with the word done.', workspace: { empty: true }, evaluator: { type: 'command', command: 'true' } })}\n`,
  );
});
afterAll(async () => {
  await mock?.close();
  removeTree(dir);
});

/** The first-prompt ids (the call NeMo-RL groups by, rollout/first-prompts.ts) of each sample's session. */
async function firstPrompts(harness: string, sandbox: 'bwrap' | 'none', node: string | null): Promise<number[][]> {
  const db = path.join(dir, `${harness}-${sandbox}.db`);
  const extra = ['--model', mock.model, '--sandbox', sandbox, '--out', path.join(dir, `${harness}-${sandbox}`), ...(node ? ['--node', node] : [])];
  const r = await polarE2e(harnessRolloutArgs({ tasks, harness, upstream: mock.url, samples: 2, db, extra }));
  // --json puts a refusal on stdout: both say why a run did not start.
  expect(r.code, `${r.stderr}\n${r.stdout}`).toBe(0);
  const store = Store.open(db, { readonly: true });
  try {
    const sessions = store.sessions.list();
    expect(sessions).toHaveLength(2);
    return sessions.map((s) => {
      const first = sampleFirstPrompt(store.requests.tokens(s.id));
      if ('unchecked' in first) throw new Error(`${harness} session ${s.id}: ${first.unchecked}`);
      return [...first.ids];
    });
  } finally {
    store.close();
  }
}

describe.each(HARNESSES)('polar rollout --harness $name: one task × 2 samples', (h) => {
  const { node, skip } = nodeFor(h);

  it.skipIf(skip || !bwrap)('in the bwrap sandbox, both samples send byte-identical first-prompt token ids', { timeout: patient(300_000) }, async () => {
    const [a, b] = await firstPrompts(h.name, 'bwrap', node);
    expect(a!.length).toBeGreaterThan(100);
    expect(b).toEqual(a);
  });

  it.skipIf(skip)(
    "with --sandbox none, each sees its own folders and the first prompts differ (what every rollout's groups looked like)",
    { timeout: patient(300_000) },
    async () => {
      const [a, b] = await firstPrompts(h.name, 'none', node);
      expect(b).not.toEqual(a);
    },
  );
});
