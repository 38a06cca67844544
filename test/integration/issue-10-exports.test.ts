import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { BUNDLED_QWEN3 } from '../../src/upstream/tito/chat-template.js';
import { contiguityProblems, gymResultProblems } from '../support/nemo-gym-schema.js';
import { openaiFormatProblems } from '../support/openai-format.js';
import { polarExportSession } from '../support/polar-cli.js';
import { REPLAY_PROVIDERS, replayScript, replaySession } from '../support/replay.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { patient } from '../support/patience.js';

/**
 * Issue 10, defects 1–3: on a database recorded with a token-in upstream (the upstream request
 * holds only `prompt` ids), `export --format sft` and `--format nemo-gym` wrote nothing; NeMo Gym
 * lines were not Responses-shaped; SFT kept text-part lists that the Qwen3 template renders as
 * nothing. Real harness recordings (Claude Code, Codex) are replayed through vllm-tito.
 */

const polarExport = (db: string, session: string, format: string) => polarExportSession(db, session, ['--format', format]);

describe.each(REPLAY_PROVIDERS.filter((p) => p.harness === 'claude-code' || p.harness === 'codex'))(
  'token-in export of a replayed $harness session',
  (provider) => {
    let mock: MockServer;
    let t: TestProxy;
    const session = 'tito-export';
    // The first four turns: everything before the compaction, so one trace.
    const merged = 'tito-export-merged';
    beforeAll(async () => {
      mock = await startMockServer({ script: replayScript, splitEvery: 3 });
      t = await startTestProxy(mock.url, { upstreamKind: 'vllm-tito', upstreamOptions: { tokenizer: BUNDLED_QWEN3 } });
      await replaySession(provider, t.proxy.url, session);
      await replaySession(provider, t.proxy.url, merged, 4);
    }, patient(60_000));
    afterAll(async () => {
      await t?.close();
      await mock?.close();
    });

    it('the recording really is token-in: no upstream request carries messages', () => {
      for (const c of t.store.requests.list(session)) {
        const body = JSON.parse(t.store.requests.get(c.id)!.upstreamRequest!);
        expect(body.messages).toBeUndefined();
        expect(Array.isArray(body.prompt)).toBe(true);
      }
    });

    it('--format nemo-gym: one line per session that is one faithful trace, Gym-valid, append-only, token fields on the last item of each call', async () => {
      // Six calls: the compaction rewrites history, so two traces. Issue 25: two rows would count the
      // session twice in Gym's per-task statistics, so it is left out and counted.
      const split = await polarExport(t.dbPath, session, 'nemo-gym');
      expect(split.lines).toHaveLength(0);
      expect(split.code).toBe(1);
      expect(split.stderr).toMatch(/export nemo-gym: 0 written, 1 left out: 1 unmerged session\n.*its main agent has 2 traces/);
      const { lines, stderr } = await polarExport(t.dbPath, merged, 'nemo-gym');
      expect(lines).toHaveLength(1);
      expect(stderr).toMatch(/export nemo-gym: 1 written, 0 left out/);
      expect(lines[0]!.polar.request_ids).toHaveLength(4);
      for (const line of lines) {
        expect(gymResultProblems(line)).toEqual([]);
        expect(contiguityProblems(line)).toEqual([]);
        const ids: string[] = line.polar.request_ids;
        const tokenItems = line.response.output.filter((o: Record<string, unknown>) => 'generation_token_ids' in o);
        expect(tokenItems).toHaveLength(ids.length);
        ids.forEach((id, k) => {
          const row = t.store.requests.get(id)!;
          expect(tokenItems[k].prompt_token_ids).toEqual(row.promptIds);
          expect(tokenItems[k].generation_token_ids).toEqual(row.sampledIds);
          expect(tokenItems[k].generation_log_probs).toEqual(row.logprobs);
        });
        // Each call's token item is its last item: the next item starts the next turn's context.
        const output = line.response.output as Record<string, unknown>[];
        output.forEach((item, i) => {
          if ('generation_token_ids' in item && output[i + 1]) expect(['function_call_output', 'message']).toContain(output[i + 1]!.type);
        });
        expect(line.responses_create_params.input[0]).toMatchObject({ type: 'message', content: [{ type: 'input_text' }] });
      }
      // Earlier tool calls and their results are real Responses items, with matching call ids.
      const output = lines[0]!.response.output as Record<string, any>[];
      expect(lines[0]).toMatchObject({ agent_ref: { name: 'polar_agent' }, _ng_task_index: 0, _ng_rollout_index: 0 });
      const calls = output.filter((o) => o.type === 'function_call').map((o) => o.call_id);
      const results = output.filter((o) => o.type === 'function_call_output').map((o) => o.call_id);
      expect(calls.length).toBeGreaterThan(1);
      expect(results.every((id) => calls.includes(id))).toBe(true);
    });

    it('--format sft: one example per trace with every text-only content list joined into a string', async () => {
      const { lines, stderr } = await polarExport(t.dbPath, session, 'sft');
      expect(lines).toHaveLength(2);
      expect(stderr).toMatch(/export sft: 2 written, 0 left out/);
      for (const example of lines) {
        // What NeMo-RL's openai_format dataset and SFT processor read, and nothing else (issue 25).
        expect(openaiFormatProblems(example)).toEqual([]);
        expect(example.messages.at(-1).role).toBe('assistant');
        expect(example.tools.length).toBeGreaterThan(0);
        for (const m of example.messages) {
          if (Array.isArray(m.content)) expect(m.content.some((p: { type: string }) => p.type !== 'text')).toBe(true);
        }
      }
      const first = lines[0]!.messages;
      expect(first.find((m: { role: string }) => m.role === 'system')?.content).toEqual(expect.any(String));
      expect(first.find((m: { role: string }) => m.role === 'user')?.content).toEqual(expect.any(String));
      expect(first.filter((m: { role: string }) => m.role === 'tool').length).toBeGreaterThan(0);
    });
  },
);
