import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { float64Bits } from '../support/bits.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

/**
 * `polar replay --rescore`: the recorded prompt + sampled ids go to a server as a token prompt and
 * come back scored. Against the policy that sampled them, every Δ is 0; against one that disagrees
 * by a planted 0.5 at every fourth position, the report shows exactly that difference.
 */
const BIN = path.resolve(__dirname, '../../bin/polar.js');
const run = promisify(execFile);
let same: ReferenceUpstream;
let shifted: ReferenceUpstream;
let t: TestProxy;

beforeAll(async () => {
  same = await startReferenceUpstream();
  shifted = await startReferenceUpstream({ policyShift: { every: 4, delta: 0.5 } });
  t = await startTestProxy(same.url);
  const client = new OpenAI({ baseURL: t.proxy.baseUrl('scored'), apiKey: 'x', maxRetries: 0 });
  await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'first question, please answer' }] });
  await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'second question' }] }).then(async (s) => {
    for await (const _ of s);
  });
});
afterAll(async () => {
  await t?.close();
  await same?.close();
  await shifted?.close();
});

const rescore = async (url: string, kind: string, extra: string[] = []) =>
  JSON.parse(
    (await run(process.execPath, [BIN, 'replay', 'scored', '--db', t.dbPath, '--rescore', '--upstream', url, '--upstream-kind', kind, '--json', ...extra]))
      .stdout,
  );

describe('re-scoring recorded tokens', () => {
  it.each(['vllm', 'sglang-tito'])('against the same policy (%s endpoint): every Δ is 0, and --out keeps both logprob arrays', async (kind) => {
    const out = path.join(t.dir, `rescored-${kind}.jsonl`);
    const r = await rescore(same.url, kind, ['--out', out]);
    expect(r).toMatchObject({ ok: true, meanAbsDelta: 0, maxAbsDelta: 0, klK1: 0, klK3: 0 });
    expect(r.calls).toHaveLength(2);
    const rows = t.store.requests.list('scored').map((c) => t.store.requests.get(c.id)!);
    expect(r.tokens).toBe(rows.reduce((a, row) => a + row.sampledIds!.length, 0));
    const lines = fs
      .readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    lines.forEach((line, i) => {
      expect(line.sampled_ids).toEqual(rows[i]!.sampledIds);
      expect(float64Bits(line.rescored_logprobs)).toEqual(float64Bits(rows[i]!.logprobs!));
    });
  });

  it('against a policy that differs by 0.5 at every fourth position: the planted difference, per call and per session', async () => {
    const r = await rescore(shifted.url, 'vllm', ['--tokenizer', 'bundled:qwen3']);
    const rows = t.store.requests.list('scored').map((c) => t.store.requests.get(c.id)!);
    let planted = 0;
    let tokens = 0;
    rows.forEach((row, i) => {
      const p = row.promptIds!.length;
      const hits = row.sampledIds!.filter((_, k) => (p + k) % 4 === 0).length;
      expect(r.calls[i].meanAbsDelta).toBeCloseTo((0.5 * hits) / row.sampledIds!.length, 12);
      expect(r.calls[i].maxAbsDelta).toBeCloseTo(0.5, 12);
      // The worst positions are decoded with the tokenizer.
      expect(r.calls[i].worst[0]).toMatchObject({ delta: expect.closeTo(-0.5, 12), text: expect.any(String) });
      planted += hits;
      tokens += row.sampledIds!.length;
    });
    expect(r.meanAbsDelta).toBeCloseTo((0.5 * planted) / tokens, 12);
    expect(r.klK1).toBeCloseTo((0.5 * planted) / tokens, 12);
    expect(r.klK3).toBeGreaterThan(0);
  });

  it('text output names each call and the session totals', async () => {
    const { stdout } = await run(process.execPath, [BIN, 'replay', 'scored', '--db', t.dbPath, '--rescore', '--upstream', shifted.url], {
      env: { ...process.env, NO_COLOR: '1' },
    });
    expect(stdout).toMatch(/CALL\s+AGENT\s+TOKENS\s+MEAN \|Δ\|/);
    expect(stdout).toMatch(/session scored: \d+ tokens re-scored on .*; mean \|Δ logprob\| 0\.\d+, max 0\.5000/);
  });

  it('--upstream mock scores on the built-in mock model (the policy the reference sampled from), and --mock-policy-shift plants the difference there', async () => {
    const same = await rescore('mock', 'vllm');
    expect(same).toMatchObject({ ok: true, meanAbsDelta: 0, maxAbsDelta: 0, upstream: "polar's mock model" });
    const shiftedMock = await rescore('mock', 'vllm', ['--mock-policy-shift', '4:0.5']);
    const shiftedRef = await rescore(shifted.url, 'vllm');
    expect(shiftedMock.meanAbsDelta).toBe(shiftedRef.meanAbsDelta);
    expect(shiftedMock.maxAbsDelta).toBeCloseTo(0.5, 12);
    const wrong = await rescore(shifted.url, 'vllm', ['--mock-policy-shift', '4:0.5']).catch((e) => e);
    expect(wrong.code).toBe(2);
    expect(wrong.stdout).toMatch(/--mock-policy-shift applies to --upstream mock only/);
    const bad = await rescore('mock', 'vllm', ['--mock-policy-shift', 'x']).catch((e) => e);
    expect(bad.code).toBe(2);
  });
});
