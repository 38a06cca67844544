import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { emptyStats, reconstruct } from '../../src/trajectory/reconstruct.js';
import { prefixMerging } from '../../src/trajectory/strategies/prefix-merging.js';
import { BUNDLED_QWEN3 } from '../../src/upstream/tito/chat-template.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { waitUntil } from '../support/wait.js';

/**
 * Pause/drain around weight updates (issue 12): a pause waits for in-flight calls to finish, new
 * calls wait for the resume, the policy version is recorded on every call, and a trace whose calls
 * span two versions says so. Asserted as orders of events, with an upstream held until released.
 */
let upstream: ReferenceUpstream;
let t: TestProxy;
const ADMIN = 'admin-file-token-0123456789abcdefghijklmnop';

beforeAll(async () => {
  upstream = await startReferenceUpstream({ holdAt: 0 });
  // Token-in mode, so a two-turn conversation merges into one trace.
  t = await startTestProxy(upstream.url, { upstreamKind: 'vllm-tito', upstreamOptions: { tokenizer: BUNDLED_QWEN3 }, policyVersion: 'v1', adminToken: ADMIN });
});
afterAll(async () => {
  upstream.release();
  await t?.close();
  await upstream?.close();
});

const admin = (action: string, body?: unknown, target: TestProxy = t, headers: Record<string, string> = { 'x-polar-auth-token': ADMIN }) =>
  fetch(`${target.proxy.url}/admin/${action}`, {
    method: action === 'status' ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });

describe('pause, drain and policy versions', () => {
  it('pause waits for in-flight calls; new calls wait for resume; each call records the version that served it; a trace across versions is marked', async () => {
    const client = new OpenAI({ baseURL: t.proxy.baseUrl('paused'), apiKey: 'x', maxRetries: 0 });
    const order: string[] = [];
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'user', content: 'first turn' }];
    const first = client.chat.completions.create({ model: 'm', messages }).then((r) => {
      order.push('first call done');
      return r;
    });
    await upstream.held();
    const pause = admin('pause', { drain_timeout_seconds: 60 }).then(async (r) => {
      order.push('pause answered');
      return (await r.json()) as Record<string, unknown>;
    });
    // The pause is in force, and cannot answer while the first call is in flight.
    let status: Record<string, unknown> = {};
    while (status.paused !== true) status = (await (await admin('status')).json()) as Record<string, unknown>;
    expect(status).toMatchObject({ paused: true, in_flight: 1, policy_version: 'v1' });
    expect(order).toEqual([]);
    upstream.release();
    expect(await pause).toMatchObject({ paused: true, drained: true, in_flight: 0 });
    const reply = await first;
    expect(order).toEqual(['first call done', 'pause answered']);

    // While paused, the next turn waits: not even the upstream sees it.
    const before = upstream.requestCount();
    // Seen arriving at the pause (a positive event), not given a pause of our own to not show up in:
    // once it waits there, the upstream not having seen it means something.
    const arrived = vi.spyOn(t.proxy.admin.gate, 'admit');
    messages.push({ role: 'assistant', content: reply.choices[0]!.message.content ?? '' }, { role: 'user', content: 'second turn' });
    const second = client.chat.completions.create({ model: 'm', messages }).then((r) => {
      order.push('second call done');
      return r;
    });
    await waitUntil('the second call to reach the pause', () => arrived.mock.calls.length === 1);
    arrived.mockRestore();
    expect(t.proxy.admin.gate.isPaused).toBe(true);
    expect(upstream.requestCount()).toBe(before);
    expect((await admin('policy-version', { version: 'v2' })).status).toBe(200);
    order.push('resumed');
    await admin('resume');
    await upstream.held();
    upstream.release();
    await second;
    expect(order).toEqual(['first call done', 'pause answered', 'resumed', 'second call done']);

    const calls = t.store.requests.list('paused');
    expect(calls.map((c) => c.policyVersion)).toEqual(['v1', 'v2']);
    const [trace] = [...reconstruct(t.store, { strategy: prefixMerging, sessions: ['paused'] }, emptyStats('prefix-merging'))];
    expect(trace!.request_ids).toHaveLength(2);
    expect(trace!.metadata).toMatchObject({ policy_versions: ['v1', 'v2'], spans_policy_versions: true });
  });

  it('a call that waits past the pause limit gets 503 with Retry-After, in its own format, and is recorded', async () => {
    const short = await startTestProxy(upstream.url, { pauseLimitMs: 300, adminToken: ADMIN });
    try {
      await admin('pause', {}, short);
      const res = await fetch(`${short.proxy.url}/s/late/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('30');
      expect(await res.json()).toMatchObject({ type: 'error', error: { message: expect.stringMatching(/paused for a weight update/) } });
      expect(short.store.requests.list('late')).toEqual([expect.objectContaining({ status: 'error', httpStatus: 503, errorCode: 'POLAR_PAUSED' })]);
    } finally {
      await short.close();
    }
  });

  it('admin routes need the auth token when one is set', async () => {
    const guarded = await startTestProxy(upstream.url, { authToken: 'admin-token-123456' });
    try {
      expect((await admin('status', undefined, guarded, {})).status).toBe(401);
      expect((await admin('pause', {}, guarded, {})).status).toBe(401);
      expect((await admin('pause', {}, guarded, { authorization: 'Bearer wrong-token-123456' })).status).toBe(401);
      const ok = await admin('status', undefined, guarded, { 'x-polar-auth-token': 'admin-token-123456' });
      expect(await ok.json()).toMatchObject({ ok: true, paused: false });
    } finally {
      await guarded.close();
    }
  });

  it('without any token set, admin routes are closed to every caller, loopback included', async () => {
    const open = await startTestProxy(upstream.url, { policyVersion: 'v1' });
    try {
      for (const action of ['status', 'pause', 'resume', 'policy-version'])
        expect((await admin(action, action === 'status' ? undefined : { version: 'evil-v1' }, open, {})).status).toBe(401);
      expect(open.proxy.admin.policyVersion).toBe('v1');
      expect(open.proxy.admin.gate.isPaused).toBe(false);
    } finally {
      await open.close();
    }
  });

  it('the admin token opens them, as x-polar-auth-token or a bearer token; a loopback caller without it gets 401', async () => {
    expect((await admin('policy-version', { version: 'evil-v1' }, t, {})).status).toBe(401);
    expect((await admin('status', undefined, t, { authorization: `Bearer ${ADMIN}` })).status).toBe(200);
    expect(t.proxy.admin.policyVersion).not.toBe('evil-v1');
  });
});
