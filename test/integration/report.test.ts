import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPORT_BAND_COLOURS } from '../../src/inspect/report-html.js';
import { allCalls, loadSessionModel, type SessionModel } from '../../src/inspect/session-model.js';
import { logprobBand, TokenPieces } from '../../src/inspect/token-strip.js';
import { loadTokenText } from '../../src/trajectory/tokenizer.js';
import { countColour, dumpDom, evaluate, findChromium, screenshot } from '../support/chromium.js';
import { recordMixedSession } from '../support/mixed-session.js';
import { qwen3ModelDir, startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

/**
 * `polar report` on a real recording (sub-agents, a compaction, a side call, a failed call), opened
 * in Debian's headless Chromium: the DOM it renders holds every call, trace, break and sampled token
 * the database does, and the screenshot shows the logprob colours.
 */
const BIN = path.resolve(__dirname, '../../bin/polar.js');
const run = promisify(execFile);
const chromium = findChromium();
let upstream: ReferenceUpstream;
let t: TestProxy;
let model: SessionModel;
let file: string;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url);
  await recordMixedSession(t, upstream, 'reported');
  model = loadSessionModel(t.store, 'reported', loadTokenText(qwen3ModelDir()))!;
  file = path.join(t.dir, 'report.html');
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const count = (html: string, re: RegExp) => [...html.matchAll(re)].length;

describe('polar report', () => {
  it('writes one self-contained file, 0600 like the database (even over a 0644 one): no scripts, nothing fetched from anywhere', async () => {
    fs.writeFileSync(file, 'old', { mode: 0o644 });
    fs.chmodSync(file, 0o644);
    const { stdout } = await run(process.execPath, [BIN, 'report', 'reported', '--db', t.dbPath, '--tokenizer', qwen3ModelDir(), '--out', file, '--json']);
    expect(JSON.parse(stdout)).toMatchObject({ ok: true, out: file, sessions: 1, calls: 11, traces: model.traces.length });
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // The same for every file that holds the recording: exports, reconstructed traces and their stats.
    const exported = path.join(path.dirname(file), 'export.jsonl');
    const traces = path.join(path.dirname(file), 'traces.jsonl');
    const stats = path.join(path.dirname(file), 'stats.json');
    for (const f of [exported, traces, stats]) fs.writeFileSync(f, '', { mode: 0o644 });
    await run(process.execPath, [BIN, 'export', '--db', t.dbPath, '--session', 'reported', '--include-partial', '--out', exported]);
    await run(process.execPath, [BIN, 'reconstruct', '--db', t.dbPath, '--session', 'reported', '--out', traces, '--stats-json', stats]);
    for (const f of [exported, traces, stats]) {
      expect(fs.statSync(f).size, f).toBeGreaterThan(0);
      expect(fs.statSync(f).mode & 0o777, f).toBe(0o600);
    }
    const html = fs.readFileSync(file, 'utf8');
    expect(html).not.toMatch(/<script|<link|<img|@import|url\(/i);
    expect(html).not.toMatch(/(src|href)="(?!#)/);
    expect(html).toContain("default-src 'none'");
  });

  it.skipIf(!chromium)('opens in Chromium with every call, trace, break and sampled token of the recording', async () => {
    const dom = await dumpDom(chromium!, file);
    expect(count(dom, /<article class="session" id="[^"]+" data-session="reported"/g)).toBe(1);
    // Calls, by agent, with their outcome: the failed one open, the side call marked.
    const calls = allCalls(model);
    const seqs = [...dom.matchAll(/<details class="call" data-seq="(\d+)" data-agent="([^"]+)" data-status="([^"]+)"/g)].map((m) => `${m[2]}#${m[1]}:${m[3]}`);
    expect(seqs.sort()).toEqual(calls.map((c) => `${c.agentId}#${c.seq}:${c.status}`).sort());
    expect(dom).toMatch(/<details class="call" data-seq="11" data-agent="main" data-status="error" data-excluded="true" open="">/);
    expect(dom).toContain('not trained: side call (no tools offered)');
    // Traces and their chains; each break with its class.
    const traces = [...dom.matchAll(/<div class="trace" id="[^"]+" data-trace-index="(\d+)" data-agent="([^"]+)" data-calls="(\d+)" data-trainable="(\d+)">/g)];
    expect(traces.map((m) => [Number(m[1]), m[2], Number(m[3]), Number(m[4])])).toEqual(
      model.traces.map((tr) => [tr.trace_index, tr.agent_id, tr.request_ids.length, tr.loss_mask.filter((m) => m === 1).length]),
    );
    const startedByBreak = model.traces.flatMap((tr) => model.breaks.filter((b) => b.requestId === tr.request_ids[0]).map((b) => b.class));
    expect([...dom.matchAll(/<p class="break" data-class="(\w+)">/g)].map((m) => m[1])).toEqual(startedByBreak);
    expect(startedByBreak).toContain('rewrite');
    // Every sampled token is drawn, in its call and in its trace; context tokens (mask 0) in traces only.
    const sampledInCalls = calls.reduce((a, c) => a + (c.promptIds && c.sampledIds ? c.sampledIds.length : 0), 0);
    const trainable = model.traces.reduce((a, tr) => a + tr.loss_mask.filter((m) => m === 1).length, 0);
    const context = model.traces.reduce((a, tr) => a + tr.loss_mask.filter((m) => m === 0).length, 0);
    expect(count(dom, /<b class="s b[0-4n]" title="id \d+/g)).toBe(sampledInCalls + trainable);
    expect(count(dom, /<u>/g)).toBe(context);
    // Each sampled token's hover names its id and logprob, and its colour is its band.
    const first = calls[0]!;
    const pieces = new TokenPieces(loadTokenText(qwen3ModelDir()));
    const firstCall = dom.slice(dom.indexOf('<details class="call" data-seq="1"'));
    const spans = [...firstCall.matchAll(/<b class="s b([0-4n])" title="id (\d+) · logprob (-?\d+\.\d{4})[^"]*">([^<]*)<\/b>/g)].slice(
      0,
      first.sampledIds!.length,
    );
    expect(spans.map((m) => Number(m[2]))).toEqual(first.sampledIds);
    expect(spans.map((m) => m[1])).toEqual(first.logprobs!.map((lp) => String(logprobBand(lp))));
    expect(spans.map((m) => m[3])).toEqual(first.logprobs!.map((lp) => lp.toFixed(4)));
    const unescapePiece = (s: string) =>
      s
        .replace(/&lt;/g, '<')
        .replace(/&gt;/g, '>')
        .replace(/&quot;/g, '"')
        .replace(/&#39;/g, "'")
        .replace(/&amp;/g, '&');
    expect(spans.map((m) => unescapePiece(m[4]!))).toEqual(first.sampledIds!.map((id) => pieces.piece(id)));
    // The conversation the harness sent, and the reply it got.
    expect(dom).toMatch(/<section class="conversation"><h3>conversation <span class="meta">as the harness sent it in call #\d+/);
    expect(dom).toContain('class="msg role-system"');
    expect(dom).toContain('class="msg role-assistant reply"');
  });

  it.skipIf(!chromium)('the screenshot shows sampled tokens in their logprob colours', async () => {
    const png = await screenshot(chromium!, file, path.join(t.dir, 'report.png'), 1280, 3000);
    expect([png.width, png.height]).toEqual([1280, 3000]);
    // Bands present among sampled tokens are painted; the page is not blank.
    const bands = new Set(allCalls(model).flatMap((c) => (c.logprobs ?? []).map((lp) => logprobBand(lp)!)));
    const painted = [...bands].filter((b) => countColour(png, REPORT_BAND_COLOURS[b]!) > 50);
    expect(painted.length).toBeGreaterThan(0);
    expect(countColour(png, '#ffffff')).toBeLessThan(png.width * png.height * 0.98);
  });

  // Issue 40: the role label is styled upper-case, and the tool call id beside it was too.
  it.skipIf(!chromium)('shows each tool call id as the harness sent it, beside the upper-case role label', async () => {
    const dom = await dumpDom(chromium!, file);
    const seq = Number(/as the harness sent it in call #(\d+)/.exec(dom)![1]);
    const sent = JSON.parse(t.store.requests.get(allCalls(model).find((c) => c.seq === seq)!.id)!.originalRequest!) as {
      messages: { role: string; tool_call_id?: string }[];
    };
    const ids = sent.messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id!);
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.every((id) => id !== id.toUpperCase())).toBe(true);
    const shown = await evaluate<string[]>(chromium!, file, `[...document.querySelectorAll('.conversation .role-tool .role')].map((e) => e.innerText)`);
    expect(shown).toEqual(ids.map((id) => `TOOL ${id}`));
  });

  it('without a tokenizer, tokens show as their ids', async () => {
    const bare = path.join(t.dir, 'bare.html');
    const { stdout } = await run(process.execPath, [BIN, 'report', 'reported', '--db', t.dbPath, '--out', bare]);
    expect(stdout).toMatch(/tokens show as ids; pass --tokenizer/);
    const html = fs.readFileSync(bare, 'utf8');
    const id = allCalls(model)[0]!.sampledIds![0]!;
    expect(html).toContain(`title="id ${id}`);
    expect(html).toContain(`⟨${id}⟩`);
  });

  it('says what to do when the session is unknown or both a session and a rollout are named', async () => {
    const unknown = await run(process.execPath, [BIN, 'report', 'nope', '--db', t.dbPath]).catch((e) => e);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no session "nope" in this database; list them with `polar sessions`/);
    const both = await run(process.execPath, [BIN, 'report', 'reported', '--rollout', 'r', '--db', t.dbPath]).catch((e) => e);
    expect(both.stderr).toMatch(/name one session, or one rollout with --rollout ID/);
  });
});
