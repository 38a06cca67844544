import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { patient } from '../support/patience.js';

/**
 * A wrong-typed field is the caller's mistake: every API answers it 400 in its own error shape,
 * never 500. Each case is a rich valid request; every value in it, at every depth, is replaced in
 * turn by values of other types, and each result goes through the real proxy to a real upstream.
 */
let upstream: ReferenceUpstream;
let t: TestProxy;

beforeAll(async () => {
  upstream = await startReferenceUpstream({ log: false });
  t = await startTestProxy(upstream.url);
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const WRONG: unknown[] = ['', 'x', 0, -1, 1.5, true, null, {}, [], ['x'], [{}], { a: 1 }];

interface Api {
  path: string;
  /** The API's token-counting endpoint, decoded like a model call. */
  countPath?: string;
  body: Record<string, unknown>;
  /** The API's own error shape. */
  isError(body: unknown): boolean;
}

const APIS: Record<string, Api> = {
  'openai-chat': {
    path: '/v1/chat/completions',
    body: {
      model: 'm',
      stream: false,
      max_tokens: 20,
      temperature: 0.5,
      messages: [
        { role: 'system', content: 's' },
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ],
      tools: [{ type: 'function', function: { name: 'read', description: 'd', parameters: { type: 'object' } } }],
      tool_choice: 'auto',
      stop: ['zz'],
    },
    isError: (b) => isObj(b) && isObj(b.error) && typeof b.error.message === 'string',
  },
  'anthropic-messages': {
    path: '/v1/messages',
    countPath: '/v1/messages/count_tokens',
    body: {
      model: 'm',
      stream: false,
      max_tokens: 20,
      temperature: 0.5,
      top_k: 5,
      system: [{ type: 'text', text: 's' }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 't', signature: 'x' },
            { type: 'text', text: 'a' },
            { type: 'tool_use', id: 't1', name: 'read', input: { p: 1 } },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'r' }], is_error: false }] },
      ],
      tools: [{ name: 'read', description: 'd', input_schema: { type: 'object' } }],
      tool_choice: { type: 'auto' },
      stop_sequences: ['zz'],
      thinking: { type: 'enabled', budget_tokens: 100 },
    },
    isError: (b) => isObj(b) && b.type === 'error' && isObj(b.error) && typeof b.error.type === 'string' && typeof b.error.message === 'string',
  },
  'openai-responses': {
    path: '/v1/responses',
    body: {
      model: 'm',
      stream: false,
      instructions: 's',
      max_output_tokens: 20,
      input: [
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 't' }] },
        { type: 'function_call', call_id: 'c1', name: 'read', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'ok' },
      ],
      tools: [{ type: 'function', name: 'read', parameters: { type: 'object' } }],
      tool_choice: 'auto',
      reasoning: { effort: 'low' },
      text: { format: { type: 'json_object' } },
    },
    isError: (b) => isObj(b) && isObj(b.error) && typeof b.error.message === 'string',
  },
  'google-generate-content': {
    path: '/v1beta/models/m:generateContent',
    countPath: '/v1beta/models/m:countTokens',
    body: {
      contents: [
        { role: 'user', parts: [{ text: 'hi' }] },
        { role: 'model', parts: [{ text: 't', thought: true }, { functionCall: { name: 'read', args: { p: 1 } } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'read', response: { ok: 1 } } }] },
      ],
      systemInstruction: { parts: [{ text: 's' }] },
      tools: [{ functionDeclarations: [{ name: 'read', description: 'd', parameters: { type: 'OBJECT', properties: { p: { type: 'STRING' } } } }] }],
      toolConfig: { functionCallingConfig: { mode: 'AUTO' } },
      generationConfig: { maxOutputTokens: 20, temperature: 0.5, stopSequences: ['zz'], thinkingConfig: { includeThoughts: true } },
    },
    isError: (b) => isObj(b) && isObj(b.error) && typeof b.error.message === 'string' && typeof b.error.status === 'string',
  },
};

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Every path to a value inside `value` (arrays by index), the root excluded. */
function paths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [];
  const entries: [string | number, unknown][] = Array.isArray(value) ? value.map((v, i) => [i, v]) : isObj(value) ? Object.entries(value) : [];
  for (const [key, child] of entries) {
    out.push([...prefix, key]);
    out.push(...paths(child, [...prefix, key]));
  }
  return out;
}

function replaced(body: unknown, at: (string | number)[], value: unknown): unknown {
  const copy = structuredClone(body) as Record<string | number, unknown>;
  let node = copy;
  for (const key of at.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[at[at.length - 1]!] = value;
  return copy;
}

async function post(path: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${t.proxy.url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, json };
}

describe.each(Object.entries(APIS))('%s: wrong-typed fields', (_name, api) => {
  it('the valid request is served', async () => {
    expect((await post(api.path, api.body)).status).toBe(200);
  });

  it(
    'every field replaced by a value of another type: 200 or 4xx in the API shape, never 5xx',
    async () => {
      const failures: string[] = [];
      for (const route of [api.path, ...(api.countPath ? [api.countPath] : [])]) {
        for (const at of paths(api.body)) {
          for (const value of WRONG) {
            const res = await post(route, replaced(api.body, at, value));
            const ok = res.status === 200 || (res.status >= 400 && res.status < 500 && api.isError(res.json));
            if (!ok) failures.push(`${route} ${at.join('.')} = ${JSON.stringify(value)}: ${res.status} ${JSON.stringify(res.json).slice(0, 200)}`);
          }
        }
      }
      expect(failures).toEqual([]);
    },
    patient(120_000),
  );
});

describe('the reported cases name the field', () => {
  it('/v1/messages with "tools": "" is a 400 in Anthropic\'s shape naming tools', async () => {
    const res = await post('/v1/messages', { ...APIS['anthropic-messages']!.body, tools: '' });
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect((res.json as { error: { message: string } }).error.message).toMatch(/tools/);
  });

  it('/v1/messages with a numeric tool_result content is a 400 naming the content', async () => {
    const body = replaced(APIS['anthropic-messages']!.body, ['messages', 2, 'content', 0, 'content'], 42);
    const res = await post('/v1/messages', body);
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect((res.json as { error: { message: string } }).error.message).toMatch(/messages\[2\]\.content\[0\]\.content/);
  });
});

describe('polar mock-server answers a malformed body as vLLM does: 400', () => {
  const direct = async (path: string, body: string) => {
    const res = await fetch(`${upstream.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    return { status: res.status, json: (await res.json()) as { error: { type: string; message: string; param: string | null } } };
  };

  it.each([
    ['not JSON', '{"messages": ['],
    ['not an object', '[1, 2]'],
    ['messages not a list', '{"model": "m", "messages": "hi"}'],
    ['a fractional max_tokens', '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1.5}'],
    ['tools not a list', '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": "x"}'],
  ])('%s', async (_what, body) => {
    const res = await direct('/v1/chat/completions', body);
    expect(res.status).toBe(400);
    expect(res.json.error.type).toBe('BadRequestError');
  });

  it('/tokenize too', async () => {
    expect((await direct('/tokenize', '{"messages": [')).status).toBe(400);
  });
});
