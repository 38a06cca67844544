import { expect, it } from 'vitest';
import type { CanonicalRequest, ChatCompletion, ChatCompletionChunk } from '../core/chat.js';
import { PolarError } from '../core/errors.js';
import { SseParser, type SseEvent } from '../core/sse/parse.js';
import { formatSseEvent } from '../core/sse/write.js';
import { StreamEventReader } from './stream-events.js';
import type { ProviderCodec } from './types.js';

/** A reply in provider-neutral terms, as a client would read it back from the wire. */
export interface ReadBack {
  reasoning: string;
  text: string;
  toolCalls: { name: string; args: unknown }[];
  finish: string;
}

export interface CodecCase {
  codec: ProviderCodec;
  /** A minimal request body in the provider's format, with the given tool names offered. */
  request(tools: string[]): unknown;
  path: string;
  readJson(reply: unknown): ReadBack;
  readStream(events: SseEvent[]): ReadBack;
  /** The provider's name for OpenAI finish reasons stop, length and tool_calls. */
  finish: { stop: string; length: string; tool_calls: string };
}

const ENC = { callId: 'req_test', created: 1_763_800_000 };
const base = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'served' };

/** vLLM's chunk shapes, the awkward ones included. */
function chunks(): ChatCompletionChunk[] {
  const c = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}): ChatCompletionChunk => ({
    ...base,
    choices: [{ index: 0, delta, finish_reason: finish, ...extra }],
  });
  return [
    c({ role: 'assistant', content: '' }),
    c({ reasoning: 'Let me ' }), // current vLLM's name
    c({ reasoning_content: 'think.' }), // older vLLM's name
    c({}), // token ids only
    c({ content: 'Hel', tool_calls: [] }),
    c({ content: 'lo' }),
    c({ content: null, tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'read', arguments: '' } }] }),
    c({ tool_calls: [{ index: 0, function: { arguments: '{"path":' } }] }),
    c({ tool_calls: [{ index: 0, function: { arguments: ' "a.ts"}' } }] }),
    c({ content: null, tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'list', arguments: '{}' } }] }),
    c({}, 'tool_calls', { stop_reason: null }),
    { ...base, choices: [], usage: { prompt_tokens: 10, completion_tokens: 12, total_tokens: 22 } },
  ];
}

function completion(finish: string, message: Record<string, unknown>): ChatCompletion {
  return {
    id: 'c',
    object: 'chat.completion',
    created: 1,
    model: 'served',
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
    usage: { prompt_tokens: 10, completion_tokens: 12 },
  };
}

const noTokens = { source: 'none' as const, promptIds: null, sampledIds: null, logprobs: null };

/** The contract every provider codec meets; each codec's test file runs it. */
export function runCodecCases(k: CodecCase): void {
  const decode = (tools: string[] = ['read', 'list']): CanonicalRequest => k.codec.decodeRequest(k.request(tools), { path: k.path });
  const streamOf = (req: CanonicalRequest, input: ChatCompletionChunk[], error?: PolarError) => {
    const s = k.codec.createStream(req, ENC);
    const reader = new StreamEventReader(ENC.callId);
    const text =
      input
        .flatMap((ch) => s.push(reader.step(ch, null)))
        .map(formatSseEvent)
        .join('') + (error ? s.error(error) : s.end(reader.counts()).map(formatSseEvent).join(''));
    return new SseParser().push(text);
  };

  it('a stream built from every vLLM chunk shape reads back as the same reply as its JSON form', () => {
    const req = decode();
    const fromStream = k.readStream(streamOf(req, chunks()));
    const fromJson = k.readJson(
      k.codec.encodeResponse(
        completion('tool_calls', {
          content: 'Hello',
          reasoning_content: 'Let me think.',
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'read', arguments: '{"path": "a.ts"}' } },
            { id: 'call_b', type: 'function', function: { name: 'list', arguments: '{}' } },
          ],
        }),
        req,
        noTokens,
        ENC,
      ),
    );
    const expected = {
      text: 'Hello',
      toolCalls: [
        { name: 'read', args: { path: 'a.ts' } },
        { name: 'list', args: {} },
      ],
      finish: k.finish.tool_calls,
    };
    expect(fromStream).toMatchObject(expected);
    expect(fromJson).toMatchObject(expected);
    expect(fromStream.reasoning).toBe(fromJson.reasoning);
  });

  it('an empty reply is still a well-formed reply, streamed or not', () => {
    const req = decode([]);
    const empty = [{ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }];
    expect(k.readStream(streamOf(req, empty))).toMatchObject({ text: '', toolCalls: [], finish: k.finish.stop });
    expect(k.readJson(k.codec.encodeResponse(completion('stop', { content: '' }), req, noTokens, ENC))).toMatchObject({ text: '', finish: k.finish.stop });
  });

  it('a reply cut by the token limit says so', () => {
    const req = decode([]);
    const cut = [{ ...base, choices: [{ index: 0, delta: { content: 'partial' }, finish_reason: 'length' }] }];
    expect(k.readStream(streamOf(req, cut))).toMatchObject({ text: 'partial', finish: k.finish.length });
    expect(k.readJson(k.codec.encodeResponse(completion('length', { content: 'partial' }), req, noTokens, ENC)).finish).toBe(k.finish.length);
  });

  it('errors render before headers with the status, and inside a stream as bytes a client recognises', () => {
    const err = new PolarError('POLAR_UPSTREAM_CONNECT', 'cannot reach the upstream', 502);
    const reply = k.codec.renderError(err);
    expect(reply.status).toBe(502);
    expect(JSON.stringify(reply.body)).toContain('cannot reach the upstream');
    const inStream = k.codec.createStream(decode([]), ENC).error(err);
    expect(inStream).toContain('cannot reach the upstream');
  });

  it('keep-alives are non-empty and carry no reply content', () => {
    const s = k.codec.createStream(decode([]), ENC);
    const bytes = s.keepAlive() + s.keepAlive();
    expect(bytes.length).toBeGreaterThan(0);
    expect(bytes).not.toMatch(/Hello|delta/);
  });

  it('rejects a body that is not a request of this provider with POLAR_BAD_REQUEST', () => {
    expect(() => k.codec.decodeRequest([1, 2], { path: k.path })).toThrow(PolarError);
  });
}
