import { render } from 'ink-testing-library';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionBrowser, type BrowserSource } from '../../src/cli/views/session-browser.js';
import { loadSessionModel } from '../../src/inspect/session-model.js';
import { TokenPieces } from '../../src/inspect/token-strip.js';
import { loadTokenText } from '../../src/trajectory/tokenizer.js';
import { recordMixedSession } from '../support/mixed-session.js';
import { qwen3ModelDir, startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { waitUntil } from '../support/wait.js';

/**
 * The `polar show` browser over a real recording (11 calls: sub-agents, a compaction, a side call,
 * a failed call), driven through its keys as a user would, frame by frame.
 */
let upstream: ReferenceUpstream;
let t: TestProxy;
let source: BrowserSource;

const KEY = { down: '\u001B[B', up: '\u001B[A', enter: '\r', escape: '\u001B' };

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url);
  // A session with no calls, made first, where the proxy's default session used to be (it is now
  // made only when a call lands there).
  t.store.sessions.ensure('idle-session');
  await recordMixedSession(t, upstream, 'browse-me');
  // Another session, so the list has something to choose between and search through (idle-session is a third).
  const text = loadTokenText(qwen3ModelDir());
  t.store.sessions.ensure('other-session', { harness: 'codex' });
  source = { sessions: () => t.store.sessions.list().reverse(), session: (id) => loadSessionModel(t.store, id, text), pieces: new TokenPieces(text) };
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

type Rendered = ReturnType<typeof render>;

/**
 * Types keys one at a time, each time waiting until the frame has changed: every key pressed here
 * changes what is shown, so the next one never lands on a frame not yet drawn (on a busy machine a
 * redraw can take longer than any fixed pause).
 */
async function press(ui: Rendered, ...keys: string[]): Promise<void> {
  for (const k of keys) {
    const before = ui.lastFrame();
    ui.stdin.write(k);
    await waitUntil(`the browser to redraw after ${JSON.stringify(k)}`, () => ui.lastFrame() !== before, { everyMs: 10, timeoutMs: 5000 });
  }
}

describe('polar show, the session browser', () => {
  it("sessions → calls by agent → one call's tokens → back, with the footer naming the keys", async () => {
    const ui = render(<SessionBrowser source={source} />);
    const { lastFrame, unmount } = ui;
    let frame = lastFrame()!;
    expect(frame).toMatch(/sessions {2}3/);
    expect(frame).toMatch(/› other-session/);
    expect(frame).toMatch(/browse-me +completed|browse-me +active/);
    expect(frame).toMatch(/enter open · \/ search · q quit/);

    const listed = frame.split('\n').filter((l) => /^[› ] \S+ {2}/.test(l));
    const position = listed.findIndex((l) => l.includes('browse-me'));
    await press(ui, ...Array(position).fill(KEY.down));
    expect(lastFrame()).toMatch(/› browse-me/);
    await press(ui, KEY.enter);
    frame = lastFrame()!;
    expect(frame).toMatch(/session browse-me .* 11 calls/);
    // Calls grouped by agent, main first; the side call and the failed call say why they are not trained on.
    const headings = [...frame.matchAll(/^agent (\S+) · (\d+) calls?$/gm)].map((m) => `${m[1]}:${m[2]}`);
    expect(headings).toEqual(['main:5', 'sub-a:2', 'sub-b:2', 'compactor:2']);
    expect(frame).toMatch(/#1 +openai-chat +ok +json +\d+\+\d+ tok +\S+ +trace 0/);
    expect(frame).toMatch(/t traces · \/ search · esc back · q quit/);

    // The second call of main: a prompt that shares its start with call #1, then what was sampled.
    await press(ui, KEY.down, KEY.enter);
    frame = lastFrame()!;
    const call2 = t.store.requests.list('browse-me').find((c) => c.agentId === 'main' && c.seq === 2)!;
    expect(frame).toMatch(new RegExp(`call #2 · agent main · openai-chat · .* · ${call2.promptTokenCount} prompt, ${call2.sampledTokenCount} sampled`));
    expect(frame).toMatch(/p ≥ 0\.9 p ≥ 0\.5 p ≥ 0\.1 p ≥ 0\.01 p < 0\.01/);
    // Opened near the end of the prompt: the assistant turn's header and the sampled text are in view.
    expect(frame).toContain('<|im_start|>assistant↵');
    const row = t.store.requests.get(call2.id)!;
    const sampledStart = source.pieces.piece(row.sampledIds![0]!);
    expect(frame).toContain(sampledStart.replace(/\n/g, '↵'));

    // '|' shows each boundary: the first sampled tokens appear exactly as the server split them.
    await press(ui, '|');
    frame = lastFrame()!;
    // Three sampled tokens on one line, none ending one: shown as the server split them, │ between.
    const shown = row.sampledIds!.map((id) => source.pieces.piece(id));
    const at = shown.findIndex((_, i) => i > 0 && shown.slice(i, i + 3).every((p) => p.length > 0 && !p.includes('\n')));
    expect(frame).toContain(`│${shown[at]}│${shown[at + 1]}│${shown[at + 2]}`);
    await press(ui, '|');
    expect(lastFrame()).not.toContain('│');

    // g goes to the top: the system prompt.
    await press(ui, 'g');
    expect(lastFrame()).toMatch(/lines 1-/);
    expect(lastFrame()).toContain('<|im_start|>system↵\nYou are main.↵');

    await press(ui, KEY.escape);
    expect(lastFrame()).toMatch(/session browse-me/);
    unmount();
  });

  it('/ searches: sessions by name, calls by agent or status, tokens by text with n for the next hit', async () => {
    const ui = render(<SessionBrowser source={source} />);
    const { lastFrame, unmount } = ui;
    await press(ui, '/', 'b', 'r', 'o', 'w', 's', 'e');
    expect(lastFrame()).toMatch(/\/browse█ {2}\(enter search · esc cancel\)/);
    await press(ui, KEY.enter);
    expect(lastFrame()).toMatch(/matching "browse": 1 of 3/);
    await press(ui, KEY.enter, '/', 'e', 'r', 'r', 'o', 'r', KEY.enter);
    let frame = lastFrame()!;
    expect(frame).toMatch(/calls matching "error": 1/);
    expect(frame).toMatch(/#11 .* error /);
    expect(frame).toMatch(/not trained: status error/);

    await press(ui, '/', ...'sub-a', KEY.enter, KEY.enter);
    frame = lastFrame()!;
    expect(frame).toMatch(/call #\d+ · agent sub-a/);
    await press(ui, '/', ...'list_files', KEY.enter);
    frame = lastFrame()!;
    expect(frame).toMatch(/"list_files": 1\/\d+/);
    expect(frame).toContain('list_files');
    const total = Number(/"list_files": 1\/(\d+)/.exec(frame)![1]);
    expect(total).toBeGreaterThan(1);
    await press(ui, 'n');
    expect(lastFrame()).toMatch(/"list_files": 2\//);
    unmount();
  });

  it('t lists the merged traces; each shows its chain and the break that started it, and opens to a masked token strip', async () => {
    const ui = render(<SessionBrowser source={source} sessionId="browse-me" />);
    const { lastFrame, unmount } = ui;
    await press(ui, 't');
    let frame = lastFrame()!;
    const model = source.session('browse-me')!;
    expect(frame).toContain(`prefix-merged traces: ${model.traces.length}, breaks: ${model.breaks.length}`);
    expect(model.breaks.length).toBeGreaterThan(0);
    expect(frame).toMatch(/› trace 0 {2}main/);
    expect(frame).toContain("the session's first trace");
    // Walk to the first trace that a break started: its class and position are named.
    const broken = model.traces.findIndex((tr) => model.breaks.some((b) => b.requestId === tr.request_ids[0]));
    const b = model.breaks.find((x) => x.requestId === model.traces[broken]!.request_ids[0])!;
    await press(ui, ...Array(broken).fill(KEY.down));
    frame = lastFrame()!;
    expect(frame).toContain(`starts at a ${b.class} break: #${b.seq} could not extend`);
    expect(frame).toContain(`at token ${b.position}`);
    expect(frame).toMatch(/trace had: ".+"/);

    // The compactor's chain: its rewrite is a break of class rewrite.
    expect(model.breaks.some((x) => x.agentId === 'compactor' && x.class === 'rewrite')).toBe(true);

    await press(ui, KEY.enter);
    frame = lastFrame()!;
    const trace = model.traces[broken]!;
    const masked = trace.loss_mask.filter((m) => m === 0).length;
    expect(frame).toMatch(
      new RegExp(
        `trace ${broken} · agent ${trace.agent_id} · ${trace.request_ids.length} calls? · ${trace.prompt_ids.length} prompt, ${trace.response_ids.length - masked} sampled${masked ? `, ${masked} context \\(mask 0\\)` : ''}`,
      ),
    );
    unmount();
  });

  it('q quits: the browser stops answering keys', async () => {
    // No pause proves a key did nothing: a second browser that has not quit gets the same keys just
    // after, and once it has redrawn (a key that does move it), the quit one has handled its keys too
    // (one process, one React scheduler: the keys are handled and drawn in the order they are typed).
    const ui = render(<SessionBrowser source={source} />);
    const live = render(<SessionBrowser source={source} />);
    ui.stdin.write('q');
    await press(live, KEY.down);
    const after = ui.lastFrame();
    ui.stdin.write(KEY.down);
    ui.stdin.write(KEY.enter);
    // Without q the same keys do move: the check below can fail.
    await press(live, KEY.down, KEY.enter);
    expect(ui.lastFrame()).toBe(after);
    live.unmount();
    ui.unmount();
  });
});
