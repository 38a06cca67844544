import { FunctionCallingConfigMode, GoogleGenAI, Type } from '@google/genai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectExactCapture, lastCall } from '../../support/capture.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../../support/reference-upstream/index.js';
import { startTestProxy, type TestProxy } from '../../support/start-proxy.js';

let upstream: ReferenceUpstream;
let t: TestProxy;
let ai: GoogleGenAI;
const session = 'gemini';

beforeAll(async () => {
  upstream = await startReferenceUpstream();
  t = await startTestProxy(upstream.url);
  // As Gemini CLI does with GOOGLE_GEMINI_BASE_URL: the SDK appends /v1beta/models/{model}:… to it.
  ai = new GoogleGenAI({ apiKey: 'AIzaSy-test-key-0123', httpOptions: { baseUrl: `${t.proxy.url}/s/${session}` } });
});

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const sentUpstream = () => upstream.calls[upstream.calls.length - 1]!.body;
const listFiles = {
  name: 'list_files',
  description: 'List files',
  // Gemini's own Schema dialect (upper-case types), as Gemini CLI sends it.
  parameters: { type: Type.OBJECT, properties: { path: { type: Type.STRING }, recursive: { type: Type.BOOLEAN } }, required: ['path'] },
};

describe('Google generateContent through polar (official @google/genai)', () => {
  it('generateContent: text, finish reason, usage; thoughts only when asked for', async () => {
    const res = await ai.models.generateContent({ model: 'gemini-2.5-pro', contents: 'Say hello.', config: { systemInstruction: 'Be brief.' } });
    expect(res.text).toContain('You said: “Say hello.”');
    expect(res.candidates![0]!.finishReason).toBe('STOP');
    expect(res.candidates![0]!.content!.parts!.some((p) => p.thought)).toBe(false);
    const { sampled, row } = expectExactCapture(t.store, session, upstream);
    expect(res.usageMetadata).toMatchObject({ promptTokenCount: sampled.promptIds.length, candidatesTokenCount: sampled.reply.ids.length });
    expect(row).toMatchObject({ requestedModel: 'gemini-2.5-pro', provider: 'google-generate-content' });
    expect(sentUpstream().messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    expect(JSON.stringify(row)).not.toContain('AIzaSy-test-key-0123');

    const thoughtful = await ai.models.generateContent({
      model: 'gemini-2.5-pro',
      contents: 'Think, then answer.',
      config: { thinkingConfig: { includeThoughts: true } },
    });
    const parts = thoughtful.candidates![0]!.content!.parts!;
    expect(parts[0]).toMatchObject({ thought: true });
    expect(parts[0]!.text).toBe(upstream.calls[upstream.calls.length - 1]!.reply.reasoning);
    expect(sentUpstream().chat_template_kwargs).toEqual({ enable_thinking: true });
  });

  it('generateContentStream: text arrives in pieces; the last chunk has finishReason and usage', async () => {
    const stream = await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'Stream a greeting.' });
    let text = '';
    let chunks = 0;
    let last: Awaited<ReturnType<typeof ai.models.generateContent>> | undefined;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.text ?? '';
      last = chunk;
    }
    const { sampled } = expectExactCapture(t.store, session, upstream);
    expect(chunks).toBeGreaterThan(5);
    expect(text).toBe(sampled.reply.content);
    expect(last!.candidates![0]!.finishReason).toBe('STOP');
    expect(last!.usageMetadata!.candidatesTokenCount).toBe(sampled.reply.ids.length);
  });

  it('function calls (Gemini schema), and the functionResponse round trip', async () => {
    const config = { tools: [{ functionDeclarations: [listFiles] }], toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } } };
    const stream = await ai.models.generateContentStream({ model: 'gemini-2.5-pro', contents: 'Please use a tool to look around.', config });
    const calls = [];
    for await (const chunk of stream) calls.push(...(chunk.functionCalls ?? []));
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ name: 'list_files', args: { path: 'src/file-0.ts', recursive: true } });
    expectExactCapture(t.store, session, upstream);
    expect((sentUpstream().tools as unknown[])[0]).toEqual({
      type: 'function',
      function: {
        name: 'list_files',
        description: 'List files',
        parameters: { type: 'object', properties: { path: { type: 'string' }, recursive: { type: 'boolean' } }, required: ['path'] },
      },
    });

    const res = await ai.models.generateContent({
      model: 'gemini-2.5-pro',
      config,
      contents: [
        { role: 'user', parts: [{ text: 'Please use a tool to look around.' }] },
        { role: 'model', parts: [{ functionCall: calls[0] }] },
        { role: 'user', parts: [{ functionResponse: { id: calls[0]!.id, name: 'list_files', response: { output: 'a.ts\nb.ts' } } }] },
      ],
    });
    expect(res.text).toContain('a.ts');
    const messages = sentUpstream().messages as Record<string, unknown>[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(messages[2]).toEqual({ role: 'tool', tool_call_id: calls[0]!.id, content: JSON.stringify({ output: 'a.ts\nb.ts' }) });
  });

  it('countTokens is answered by the upstream tokenizer and not recorded', async () => {
    const before = t.store.requests.list(session).length;
    const counted = await ai.models.countTokens({ model: 'gemini-2.5-pro', contents: 'How many tokens?' });
    expect(counted.totalTokens).toBeGreaterThan(3);
    expect(t.store.requests.list(session)).toHaveLength(before);
  });

  it('errors: the Google error object before headers, and mid-stream', async () => {
    upstream.fault('http-500');
    const err = await ai.models.generateContent({ model: 'gemini-2.5-pro', contents: 'x' }).catch((e: unknown) => e);
    expect((err as { status: number }).status).toBe(502);
    expect((err as Error).message).toContain('UNAVAILABLE');

    upstream.fault('error-event');
    const stream = await ai.models.generateContentStream({ model: 'gemini-2.5-pro', contents: 'x' });
    await expect(
      (async () => {
        for await (const _ of stream) {
          // drain
        }
      })(),
    ).rejects.toThrow(/CUDA error/);
    expect(lastCall(t.store, session)).toMatchObject({ status: 'error', provider: 'google-generate-content', streamed: true });
  });
});
