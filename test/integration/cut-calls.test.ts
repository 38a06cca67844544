import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RequestRecord } from '../../src/store/requests.js';
import { BUNDLED_QWEN3 } from '../../src/upstream/tito/chat-template.js';
import { startReferenceUpstream, type LoggedCall, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { waitUntil } from '../support/wait.js';

/**
 * Issue 43: in a 16-host run with faults, one stored call's token ids matched no reply the model
 * server logged (1 only in the server's log, 1 only in PostgreSQL). The rule: a call cut by a fault
 * is stored as partial, never as another complete call. Each fault of that run, on the path a
 * worker uses (vllm-tito, streamed), against the mock server's own log:
 * - the stored call is never `ok`: it is `error` or `aborted`, with the ids that arrived, a strict
 *   prefix of the reply the server sampled (a SIGKILLed proxy: issue-10-crash.test.ts);
 * - the mock server logs a reply when it samples it, before its first byte is written, so a reply
 *   cut on the way is in its log whole: comparing every stored call with that log (not only the
 *   complete ones, against replies sent whole) reports each cut call as one reply "only in the
 *   server's log" and one call "only in PostgreSQL". `whole` on a log entry now says whether the
 *   reply was written to its end;
 * - a reset that reaches polar on a kept-alive connection before any reply byte is taken for a
 *   server that closed an idle connection, and the request is sent again: if the server had taken
 *   it, it generated twice, and its log holds one reply more than the calls polar stored.
 */

let upstream: ReferenceUpstream | null = null;
let t: TestProxy | null = null;
afterEach(async () => {
  await t?.close();
  await upstream?.close();
  t = null;
  upstream = null;
});

async function setUp(options: Parameters<typeof startReferenceUpstream>[0], bodyTimeoutMs?: number): Promise<{ up: ReferenceUpstream; proxy: TestProxy }> {
  upstream = await startReferenceUpstream({ chunkTokens: 1, ...options });
  t = await startTestProxy(upstream.url, {
    upstreamKind: 'vllm-tito',
    upstreamOptions: { tokenizer: BUNDLED_QWEN3, ...(bodyTimeoutMs ? { bodyTimeoutMs } : {}) },
  });
  return { up: upstream, proxy: t };
}

/** A streamed chat call as a harness makes it; `leaveAfter` events in, it disconnects. Resolves with the SSE text received. */
async function streamCall(proxy: TestProxy, content: string, leaveAfter?: { events: number; then?: () => void }): Promise<string> {
  const abort = new AbortController();
  const res = await fetch(`${proxy.proxy.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content }] }),
    signal: abort.signal,
  });
  let text = '';
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      if (leaveAfter && (text.match(/^data: /gm)?.length ?? 0) >= leaveAfter.events) {
        abort.abort();
        leaveAfter.then?.();
        break;
      }
    }
  } catch (err) {
    if (!abort.signal.aborted) throw err;
  }
  return text;
}

function lastRow(proxy: TestProxy): RequestRecord {
  return proxy.store.requests.get(proxy.store.requests.list(proxy.session).at(-1)!.id)!;
}

/** What a fault leaves: the stored call is partial, and its ids are where the server's reply was cut. */
function expectPartial(row: RequestRecord, logged: LoggedCall): void {
  expect(row.status).not.toBe('ok');
  expect(row.promptIds).toEqual(logged.promptIds);
  const ids = row.sampledIds ?? [];
  expect(ids.length).toBeLessThan(logged.reply.ids.length);
  expect(ids).toEqual(logged.reply.ids.slice(0, ids.length));
  // The server's log holds the whole reply it sampled, and (now) says it was not sent whole.
  expect(logged.whole).toBe(false);
}

describe('a call cut by a fault (vllm-tito, streamed)', () => {
  it('the server drops the connection mid-stream: stored as error with the ids that arrived; the log holds the whole reply', async () => {
    const { up, proxy } = await setUp({});
    up.fault('drop');
    const text = await streamCall(proxy, 'tell me a long story');
    expect(text).toContain('error');
    const row = lastRow(proxy);
    expect(row).toMatchObject({ status: 'error' });
    await waitUntil('the server to see the connection closed', () => up.calls[0]!.whole !== undefined);
    expectPartial(row, up.calls[0]!);
  });

  it('the network goes silent mid-stream (a host cut off): stored as error once the body timeout passes, with the ids that arrived', async () => {
    const { up, proxy } = await setUp({ holdAt: 4 }, 500);
    const text = await streamCall(proxy, 'tell me a long story');
    expect(text).toMatch(/stalled/);
    const row = lastRow(proxy);
    expect(row).toMatchObject({ status: 'error', errorCode: 'POLAR_UPSTREAM_BODY_TIMEOUT' });
    expect(row.sampledIds!.length).toBeGreaterThan(0);
    up.release();
    await waitUntil('the server to see the connection closed', () => up.calls[0]!.whole !== undefined);
    expectPartial(row, up.calls[0]!);
  });

  it('the harness is killed mid-stream (a lost lease, a SIGKILLed agent): stored as aborted with the ids that arrived', async () => {
    const { up, proxy } = await setUp({ holdAt: 4 });
    await streamCall(proxy, 'tell me a long story', { events: 3 });
    await waitUntil('the aborted call recorded', () => lastRow(proxy).status !== 'in_progress');
    up.release();
    await waitUntil('the server to see the connection closed', () => up.calls[0]!.whole !== undefined);
    const row = lastRow(proxy);
    expect(row).toMatchObject({ status: 'aborted' });
    expectPartial(row, up.calls[0]!);
  });

  it("a harness's retry after a cut is a call of its own: the complete one matches its own reply, the cut one stays partial", async () => {
    const { up, proxy } = await setUp({});
    up.fault('drop');
    await streamCall(proxy, 'same request');
    await streamCall(proxy, 'same request');
    await waitUntil('both replies settled at the server', () => up.calls.length === 2 && up.calls.every((c) => c.whole !== undefined));
    const rows = proxy.store.requests.list(proxy.session).map((r) => proxy.store.requests.get(r.id)!);
    expect(rows.map((r) => r.status)).toEqual(['error', 'ok']);
    expectPartial(rows[0]!, up.calls[0]!);
    expect(up.calls[1]!.whole).toBe(true);
    expect(rows[1]!.sampledIds).toEqual(up.calls[1]!.reply.ids);
    // The comparison a fleet check makes: complete calls against replies sent whole. Comparing
    // every stored call with every logged reply instead (each reply claimed once) gives the run's
    // "1 only in the server's log, 1 only in PostgreSQL".
    const key = (ids: readonly number[] | null) => (ids ?? []).join(',');
    const unclaimed = up.calls.map((c) => key(c.reply.ids));
    const onlyStored = rows.filter((r) => {
      const at = unclaimed.indexOf(key(r.sampledIds));
      if (at === -1) return true;
      unclaimed.splice(at, 1);
      return false;
    });
    expect([onlyStored.length, unclaimed.length]).toEqual([1, 1]);
    expect(onlyStored[0]!.status).toBe('error');
    const complete = rows.filter((r) => r.status === 'ok').map((r) => key(r.sampledIds));
    const sentWhole = up.calls.filter((c) => c.whole).map((c) => key(c.reply.ids));
    expect(complete).toEqual(sentWhole);
  });
});

describe('a connection reset after the server took the request', () => {
  it('is sent again on a fresh connection: the server generates twice, and the call stores the reply the harness got (a log check must allow for it)', async () => {
    const { up } = await setUp({});
    // A hop between polar and the server (a load balancer, a NAT that forgot the flow) that resets
    // the second request's kept-alive connection after the server answered it, before a byte reaches polar.
    let seen = 0;
    const hop = http.createServer(async (req, res) => {
      const parts: Buffer[] = [];
      for await (const part of req) parts.push(part as Buffer);
      const post = req.method === 'POST';
      const upstreamRes = await fetch(`${up.url}${req.url}`, {
        method: req.method ?? 'GET',
        headers: { 'content-type': 'application/json' },
        ...(post ? { body: Buffer.concat(parts) } : {}),
      });
      const text = await upstreamRes.text();
      if (post && ++seen === 2) {
        req.socket.resetAndDestroy();
        return;
      }
      res.writeHead(upstreamRes.status, { 'content-type': 'application/json' }).end(text);
    });
    await new Promise<void>((r) => hop.listen(0, '127.0.0.1', () => r()));
    const proxy = await startTestProxy(`http://127.0.0.1:${(hop.address() as AddressInfo).port}`, {
      upstreamKind: 'vllm-tito',
      upstreamOptions: { tokenizer: BUNDLED_QWEN3 },
    });
    try {
      for (const content of ['first', 'second']) {
        const r = await fetch(`${proxy.proxy.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] }),
        });
        expect(r.status).toBe(200);
      }
      const rows = proxy.store.requests.list(proxy.session).map((r) => proxy.store.requests.get(r.id)!);
      expect(rows.map((r) => r.status)).toEqual(['ok', 'ok']);
      // Three generations for two calls: the reset one was sent again.
      expect(up.calls.length).toBe(3);
      expect(up.calls[1]!.promptIds).toEqual(up.calls[2]!.promptIds);
      expect(rows[1]!.sampledIds).toEqual(up.calls[2]!.reply.ids);
    } finally {
      await proxy.close();
      await new Promise((r) => hop.close(r));
    }
  });
});
