import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claudeCode } from '../../src/harness/claude-code.js';
import { startProxy } from '../../src/proxy/server.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';

let upstream: ReferenceUpstream;
let t: TestProxy;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url, { defaultSession: 'default-one' });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const ask = (client: OpenAI) => client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });

describe('session routing', () => {
  it('a path prefix /s/<session>/v1 names the session (and wins over header and key)', async () => {
    const client = new OpenAI({
      baseURL: t.proxy.baseUrl('by-path'),
      apiKey: 'polar-by-key',
      defaultHeaders: { 'x-polar-session': 'by-header' },
      maxRetries: 0,
    });
    await ask(client);
    expect(t.store.requests.list('by-path')).toHaveLength(1);
    expect(t.store.sessions.get('by-path')!.metadata).toMatchObject({ session_source: 'path' });
  });

  it('then the x-polar-session header, then a polar- API key (Bearer or x-api-key)', async () => {
    await ask(new OpenAI({ baseURL: t.proxy.baseUrl(), apiKey: 'polar-by-key', defaultHeaders: { 'x-polar-session': 'by-header' }, maxRetries: 0 }));
    expect(t.store.requests.list('by-header')).toHaveLength(1);
    await ask(new OpenAI({ baseURL: t.proxy.baseUrl(), apiKey: 'polar-by-key', maxRetries: 0 }));
    expect(t.store.requests.list('by-key')).toHaveLength(1);
    const res = await fetch(`${t.proxy.baseUrl()}/chat/completions`, {
      method: 'POST',
      headers: { 'x-api-key': 'polar-by-x-api-key' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    expect(t.store.requests.list('by-x-api-key')).toHaveLength(1);
  });

  it('else the proxy default session; an ordinary API key does not name a session', async () => {
    const before = t.store.requests.list('default-one').length;
    await ask(new OpenAI({ baseURL: t.proxy.baseUrl(), apiKey: 'sk-ordinary', maxRetries: 0 }));
    expect(t.store.requests.list('default-one')).toHaveLength(before + 1);
  });

  it('the agent id comes from the agent header, else main', async () => {
    await ask(new OpenAI({ baseURL: t.proxy.baseUrl('agents'), apiKey: 'x', defaultHeaders: { 'x-polar-agent': 'sub-7' }, maxRetries: 0 }));
    await ask(new OpenAI({ baseURL: t.proxy.baseUrl('agents'), apiKey: 'x', maxRetries: 0 }));
    expect(t.store.requests.list('agents').map((c) => [c.seq, c.agentId])).toEqual([
      [1, 'sub-7'],
      [2, 'main'],
    ]);
  });

  it("a harness's sub-agent header names the agent (Claude Code's x-claude-code-agent-id)", async () => {
    const p = await startProxy({
      store: t.store,
      upstream: t.upstream,
      servedModel: 'Qwen/Qwen3-8B',
      defaultSession: 'cc',
      port: 0,
      agentHeaders: claudeCode.agentHeaders,
    });
    try {
      const url = `${p.url}/s/cc-agents/v1/messages`;
      const body = JSON.stringify({ model: 'm', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
      await fetch(url, { method: 'POST', body, headers: { 'x-claude-code-session-id': 's-1' } });
      await fetch(url, { method: 'POST', body, headers: { 'x-claude-code-session-id': 's-1', 'x-claude-code-agent-id': 'explore-7' } });
      expect(t.store.requests.list('cc-agents').map((c) => c.agentId)).toEqual(['main', 'explore-7']);
    } finally {
      await p.close(1000);
    }
  });

  it('an invalid session name is refused with 400 and filed under the default session', async () => {
    const before = t.store.requests.list('default-one').length;
    const res = await fetch(`${t.proxy.url}/s/${encodeURIComponent('bad name!')}/v1/chat/completions`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/invalid session name/);
    expect(t.store.requests.list('default-one')).toHaveLength(before + 1);
  });
});

describe('binding and auth', () => {
  it('refuses a non-loopback host without --auth-token', async () => {
    await expect(startProxy({ store: t.store, upstream: t.upstream, servedModel: 'm', defaultSession: 'x', host: '0.0.0.0', port: 0 })).rejects.toMatchObject({
      code: 'POLAR_USAGE',
      message: expect.stringMatching(/--auth-token/),
    });
  });

  it('with --auth-token every call must present it (as API key or x-polar-auth-token); it is never stored', async () => {
    const token = 'tok-0123456789abcdef';
    const p = await startProxy({
      store: t.store,
      upstream: t.upstream,
      servedModel: 'Qwen/Qwen3-8B',
      defaultSession: 'auth',
      host: '0.0.0.0',
      port: 0,
      authToken: token,
    });
    try {
      const url = `http://127.0.0.1:${p.port}/s/authed/v1`;
      const denied = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(denied.status).toBe(401);
      expect(((await denied.json()) as { error: { type: string } }).error.type).toBe('authentication_error');
      await ask(new OpenAI({ baseURL: url, apiKey: token, maxRetries: 0 }));
      const byHeader = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { 'x-polar-auth-token': token },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(byHeader.status).toBe(200);
      const rows = t.store.requests.list('authed').map((c) => t.store.requests.get(c.id)!);
      expect(rows.map((r) => r.httpStatus)).toEqual([401, 200, 200]);
      expect(JSON.stringify(rows)).not.toContain(token);
    } finally {
      await p.close(1000);
    }
  });
});
