import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LineBuffer, traceLines, writeTraceLine } from './jsonl.js';

/** The contract: exactly JSON.stringify's bytes and a newline, whatever the trace holds. */
const line = (trace: object) => {
  const out = new LineBuffer();
  writeTraceLine(out, trace);
  return out.take().toString('utf8');
};

const base = {
  session_id: 'ses-ü "quoted" \\ \n 日本 🚀',
  agent_id: 'main',
  strategy: 'prefix-merging',
  trace_index: 0,
  request_ids: ['r1', 'r2'],
  prompt_ids: [0, 1, 9, 10, 99, 100, 151_000, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1],
  response_ids: [5, 6, 7],
  loss_mask: [1, 0, 1],
  response_logprobs: [-0.1, 0, -0, -1e-300, -(2 ** -1074), -0.30000000000000004, -12, -123456789.5, Number.NaN, Number.NEGATIVE_INFINITY],
  finish_reason: null,
  reward: 0.5,
  status: 'ok',
  partial: false,
  rollout_id: null,
  task_id: undefined,
  advantage: Number.NaN,
  metadata: { calls: 2, nested: { a: [1, 'x', null], f: undefined }, prompt_ids: 'not the array' },
};

describe('trace lines', () => {
  it('are byte for byte JSON.stringify: ids, every logprob bit, escapes, undefined and non-finite values', () => {
    expect(line(base)).toBe(`${JSON.stringify(base)}\n`);
    expect(line({ ...base, response_logprobs: null, finish_reason: 'stop', extra: () => 1 })).toBe(
      `${JSON.stringify({ ...base, response_logprobs: null, finish_reason: 'stop', extra: () => 1 })}\n`,
    );
    expect(line({ prompt_ids: [], response_ids: [1, 'two', 3], loss_mask: [1, null] })).toBe(
      `${JSON.stringify({ prompt_ids: [], response_ids: [1, 'two', 3], loss_mask: [1, null] })}\n`,
    );
    expect(line({ toJSON: () => ({ swapped: true }) })).toBe('{"swapped":true}\n');
  });

  it('random traces of every size and sign come out the same', () => {
    let seed = 7;
    const rand = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let k = 0; k < 200; k++) {
      const n = Math.floor(rand() * 3000);
      const ids = Array.from({ length: n }, () => Math.floor(rand() * 2 ** (1 + Math.floor(rand() * 32))));
      const lps = Array.from({ length: n }, () =>
        rand() < 0.3 ? 0 : rand() < 0.5 ? -Math.floor(rand() * 1000) : -rand() * 10 ** (Math.floor(rand() * 40) - 20),
      );
      const trace = { ...base, prompt_ids: ids, response_ids: ids.map((x) => -x), response_logprobs: lps };
      expect(line(trace)).toBe(`${JSON.stringify(trace)}\n`);
    }
  });

  it("a prompt that starts with the last one's ids reuses its text, and only ever the ids it shares", () => {
    const out = new LineBuffer();
    let prompt = [900, 1, 2, 3];
    const prompts: unknown[][] = [];
    for (let i = 0; i < 60; i++) {
      prompts.push(prompt);
      // Mostly growing, as a session's calls do; sometimes cut, rewritten or strange.
      const r = i % 6;
      prompt =
        r === 0
          ? [...prompt, i, i * 1000, 2 ** 31 + i]
          : r === 1
            ? prompt.slice(0, Math.floor(prompt.length / 2))
            : r === 2
              ? [...prompt.slice(0, 2), 77, ...prompt.slice(3)]
              : r === 3
                ? [...prompt, -0, Number.NaN, -1.5, 0]
                : r === 4
                  ? [5, ...prompt]
                  : [...prompt, i];
    }
    prompts.push([], [1], [1, 'x'], [1, 'x', 3], [1, 2]);
    const expected = prompts.map((p, i) => `${JSON.stringify({ trace_index: i, prompt_ids: p, response_ids: [1] })}\n`).join('');
    prompts.forEach((p, i) => writeTraceLine(out, { trace_index: i, prompt_ids: p, response_ids: [1] }));
    expect(out.take().toString('utf8')).toBe(expected);
    // A prompt changed after it was written is not read back from the memo.
    const mutable = [1, 2, 3, 4];
    writeTraceLine(out, { prompt_ids: mutable });
    mutable[1] = 20;
    writeTraceLine(out, { prompt_ids: [...mutable, 5] });
    expect(out.take().toString('utf8')).toBe('{"prompt_ids":[1,2,3,4]}\n{"prompt_ids":[1,20,3,4,5]}\n');
  });

  it('traceLines writes every line, in order, to a 0600 file', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'polar-jsonl-')), 'out.jsonl');
    const out = traceLines(file);
    const traces = Array.from({ length: 300 }, (_, i) => ({ ...base, trace_index: i, prompt_ids: Array.from({ length: 2000 + i }, (_, k) => k * i) }));
    for (const t of traces) await out.write(t);
    await out.close();
    expect(fs.readFileSync(file, 'utf8')).toBe(traces.map((t) => `${JSON.stringify(t)}\n`).join(''));
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  });
});
