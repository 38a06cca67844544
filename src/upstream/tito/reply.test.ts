import { describe, expect, it } from 'vitest';
import type { ChatDelta } from '../../core/chat.js';
import { loadQwen3 } from '../../mock-server/qwen3.js';
import { sampleReply } from '../../mock-server/sampler.js';
import { qwen3ModelDir } from '../../core/bundled-tokenizer.js';
import { BUNDLED_QWEN3, loadChatTemplate } from './chat-template.js';
import type { Generation } from './dialect.js';
import { ReplyAssembler } from './reply.js';

const template = loadChatTemplate(BUNDLED_QWEN3, qwen3ModelDir);
const qwen = loadQwen3();

const assembler = (stop: string[] = []) =>
  new ReplyAssembler({ template, promptIds: [1, 2, 3], callId: 'c1', model: 'm', created: 0, startsInReasoning: false, clientLogprobs: false, stop });

const gen = (ids: number[], finish: string | null, stopReason: Generation['stopReason'] = null): Generation => ({
  sampledIds: ids,
  logprobs: ids.map(() => -0.5),
  promptIds: null,
  finishReason: finish,
  stopReason,
  usage: null,
});

/** Streams the ids one token per piece and folds the chunks back into one message. */
function streamed(ids: number[], finish: string, stop: string[] = [], stopReason: Generation['stopReason'] = null) {
  const a = assembler(stop);
  const deltas: ChatDelta[] = [];
  let finishReason: string | null = null;
  let reason: unknown;
  ids.forEach((id, i) => {
    const last = i === ids.length - 1;
    for (const { chunk } of a.push(gen([id], last ? finish : null, last ? stopReason : null))) {
      deltas.push(chunk.choices[0]!.delta);
      if (chunk.choices[0]!.finish_reason) {
        finishReason = chunk.choices[0]!.finish_reason;
        reason = chunk.choices[0]!.stop_reason;
      }
    }
  });
  return {
    content: deltas.map((d) => d.content ?? '').join(''),
    reasoning: deltas.map((d) => d.reasoning_content ?? '').join(''),
    tools: deltas.flatMap((d) => d.tool_calls ?? []).map((c) => ({ name: c.function!.name, arguments: c.function!.arguments })),
    pieces: deltas.filter((d) => d.content).map((d) => d.content!),
    finishReason,
    stopReason: reason,
  };
}

describe('ReplyAssembler on real Qwen3 ids', () => {
  it('one token per piece gives the same reply as the whole output at once', () => {
    const reply = sampleReply(
      qwen,
      {
        reasoning: 'Plan: two calls — naïve 日本語 🚀.',
        content: 'Looking.',
        toolCalls: [
          { name: 'ls', arguments: { path: 'src' } },
          { name: 'cat', arguments: { path: 'a.ts' } },
        ],
      },
      { splitEvery: 2 },
    );
    const whole = assembler().complete(gen(reply.ids, 'stop')).completion.choices[0]!;
    const s = streamed(reply.ids, 'stop');
    expect(whole.message.reasoning_content).toBe(reply.reasoning);
    expect(whole.message.content).toBe(reply.content);
    expect(whole.finish_reason).toBe('tool_calls');
    expect(s).toMatchObject({ content: reply.content, reasoning: reply.reasoning, finishReason: 'tool_calls' });
    expect(s.tools).toEqual(reply.toolCalls.map((c) => ({ name: c.name, arguments: JSON.stringify(JSON.parse(c.arguments)) })));
    expect(whole.message.tool_calls!.map((c) => c.function.name)).toEqual(['ls', 'cat']);
  });

  it('cuts a stop string the server matched, never streaming any of it, and reports it', () => {
    const text = 'Hello there. END of the answer';
    const ids = qwen.encode(text);
    // The server stops at the token that completes "END" and says which stop string it matched.
    let n = 1;
    while (!qwen.decode(ids.slice(0, n)).includes('END')) n++;
    const sampled = ids.slice(0, n);
    const whole = assembler(['END']).complete(gen(sampled, 'stop', 'END')).completion.choices[0]!;
    expect(whole.message.content).toBe('Hello there. ');
    expect(whole.stop_reason).toBe('END');
    const s = streamed(sampled, 'stop', ['END'], 'END');
    expect(s.content).toBe('Hello there. ');
    expect(s.pieces.some((p) => p.includes('E'))).toBe(false);
    expect(s.stopReason).toBe('END');
  });

  it('holds back enough to cut a stop string or hide a stop token even when the finish comes in a piece of its own', () => {
    const a = assembler(['END']);
    const text: string[] = [];
    for (const id of qwen.encode('Hello there. END')) for (const { chunk } of a.push(gen([id], null))) text.push(chunk.choices[0]!.delta.content ?? '');
    for (const { chunk } of a.push(gen([], 'stop', 'END'))) text.push(chunk.choices[0]!.delta.content ?? '');
    expect(text.join('')).toBe('Hello there. ');
    const b = assembler();
    const shown: string[] = [];
    for (const id of [...qwen.encode('Done.'), qwen.tokenId('<|endoftext|>')!])
      for (const { chunk } of b.push(gen([id], null))) shown.push(chunk.choices[0]!.delta.content ?? '');
    for (const { chunk } of b.push(gen([], 'stop'))) shown.push(chunk.choices[0]!.delta.content ?? '');
    expect(shown.join('')).toBe('Done.');
  });

  it('does not show the token that ended the turn, whichever stop token it was', () => {
    const ids = [...qwen.encode('Done.'), qwen.tokenId('<|endoftext|>')!];
    expect(assembler().complete(gen(ids, 'stop')).completion.choices[0]!.message.content).toBe('Done.');
    expect(streamed(ids, 'stop').content).toBe('Done.');
    const withEnd = [...qwen.encode('Done.'), template.turnEnd.id];
    expect(streamed(withEnd, 'stop').content).toBe('Done.');
  });
});
