import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { DEMO_CONTENT, DEMO_FILE } from '../../src/mock-server/script.js';
import { Store } from '../../src/store/store.js';
import { emptyStats, reconstruct } from '../../src/trajectory/reconstruct.js';
import { prefixMerging } from '../../src/trajectory/strategies/prefix-merging.js';
import { verifySessions } from '../../src/trajectory/verify-sessions.js';
import { expectSessionCapturedExactly, HARNESSES, nodeFor, polarRun, taskRunArgs, workspace } from './support.js';
import { patient } from '../support/patience.js';

/**
 * All six real harness CLIs, streaming as they do, through `polar run --upstream-kind vllm-tito`: polar
 * renders the Qwen3 template, sends token ids to the mock server's /v1/completions, parses the
 * sampled ids back into each harness's own stream format, and bridges every turn. The harness must
 * still finish the task, and its main agent's calls must form one faithful trace.
 */
let mock: MockServer;
beforeAll(async () => {
  mock = await startMockServer();
});
afterAll(async () => {
  await mock?.close();
});

/**
 * SGLang's /generate too, for the harnesses that set no reply budget of their own (Codex, Gemini
 * CLI): polar's budget is then all the context leaves, and the mock holds SGLang's rule that
 * prompt + max_new_tokens stay strictly below the context (vLLM takes them up to it).
 */
const CASES = [
  ...HARNESSES.map((h) => ({ ...h, kind: 'vllm-tito' })),
  ...HARNESSES.filter((h) => h.name === 'codex' || h.name === 'gemini-cli').map((h) => ({ ...h, kind: 'sglang-tito' })),
];

describe.each(CASES)('polar run --harness $name --upstream-kind $kind', (harness) => {
  const { name, kind } = harness;
  const { node, skip } = nodeFor(harness);
  it.skipIf(skip)(
    'completes the task; every turn after the first is bridged and the main agent merges into one trace',
    { timeout: patient(300_000) },
    async () => {
      const w = workspace();
      try {
        const session = `${kind}-${name}`;
        // --sampling trainer: captured for training, so the harnesses' own top_p / top_k (Gemini CLI,
        // Pi) are replaced by the trainer's and the calls stay trainable (pass-through would flag them).
        const r = await polarRun(
          taskRunArgs(
            name,
            ['--upstream', mock.url, '--upstream-kind', kind, '--tokenizer', 'bundled:qwen3', '--sampling', 'trainer'],
            w,
            session,
            node ? ['--node', node] : [],
          ),
        );
        const result = JSON.parse(r.stdout.slice(r.stdout.lastIndexOf('\n{') + 1)) as { exitCode: number; logFile: string };
        expect(
          result.exitCode,
          `${name} exited ${result.exitCode}; log:\n${fs.existsSync(result.logFile) ? fs.readFileSync(result.logFile, 'utf8').slice(-3000) : r.stderr}`,
        ).toBe(0);
        expect(fs.readFileSync(path.join(w.ws, DEMO_FILE), 'utf8').trim()).toBe(DEMO_CONTENT);
        expect(expectSessionCapturedExactly(w.db, session, mock)).toBeGreaterThanOrEqual(3);

        const store = Store.open(w.db, { readonly: true });
        try {
          // No call was turned away for its length (SGLang's 400 on a budget that fills the context).
          expect(store.requests.list(session).filter((c) => c.httpStatus === 400)).toEqual([]);
          const rows = store.requests.tokens(session).filter((c) => c.status === 'ok' && c.agentId === 'main' && c.toolCount > 0);
          expect(rows.length).toBeGreaterThanOrEqual(3);
          expect(rows[0]!.render).toMatchObject({ mode: 'full' });
          for (const row of rows.slice(1)) expect(row.render, `call #${row.seq}`).toMatchObject({ mode: 'bridged' });
          const stats = emptyStats(prefixMerging.name);
          const traces = [...reconstruct(store, { strategy: prefixMerging, sessions: [session] }, stats)];
          const main = traces.filter((t) => t.agent_id === 'main' && t.request_ids.includes(rows[0]!.id));
          expect(main).toHaveLength(1);
          expect(main[0]!.request_ids).toEqual(expect.arrayContaining(rows.map((x) => x.id)));
          expect(stats.prompts.bridgedUnmerged).toEqual([]);
          expect([...verifySessions(store, { strategy: prefixMerging, sessions: [session] })]).toEqual([]);
        } finally {
          store.close();
        }
      } finally {
        w.cleanup();
      }
    },
  );
});
