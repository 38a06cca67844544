import { describe, expect, it } from 'vitest';
import { loadQwen3 } from '../../mock-server/qwen3.js';
import { sampleReply, type ScriptedReply } from '../../mock-server/sampler.js';
import { OutputParser, type OutputParserOptions, type ParsedDelta } from './output-parser.js';

/** Feeds text in the given cut points and folds the deltas into one reply. */
function parse(text: string, cuts: number[], options: OutputParserOptions = { format: 'hermes', idPrefix: 'call_' }) {
  const parser = new OutputParser(options);
  const all: ParsedDelta[] = [];
  let from = 0;
  for (const cut of [...cuts, text.length]) {
    all.push(parser.push(text.slice(from, cut)));
    from = cut;
  }
  all.push(parser.end());
  return {
    reasoning: all.map((d) => d.reasoning ?? '').join('') || null,
    content: all.map((d) => d.content ?? '').join('') || null,
    toolCalls: all.flatMap((d) => d.toolCalls ?? []),
  };
}

function randomCuts(length: number, seed: number): number[] {
  const cuts: number[] = [];
  let x = seed;
  for (let i = 0; i < 12; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    cuts.push(x % (length + 1));
  }
  return [...new Set(cuts)].sort((a, b) => a - b);
}

const REPLIES: [string, ScriptedReply][] = [
  ['reasoning then text', { reasoning: 'Think about <b>it</b> first.', content: 'Hello! a < b and b > a.\nTwo lines.' }],
  [
    'reasoning then parallel tool calls',
    {
      reasoning: 'Two calls.',
      toolCalls: [
        { name: 'ls', arguments: { path: 'src', deep: true } },
        { name: 'read', arguments: { path: 'a.ts' } },
      ],
    },
  ],
  ['text then a tool call, no reasoning', { content: 'Let me look.', toolCalls: [{ name: 'ls', arguments: {} }] }],
  ['text only', { content: 'Just text, with a <tag> that is not markup.' }],
];

describe('OutputParser on real Qwen3 output', () => {
  const qwen = loadQwen3();
  it.each(REPLIES)('%s: the same reply however the text is cut', (_name, scripted) => {
    const sampled = sampleReply(qwen, scripted, { splitEvery: 3 });
    // The text a token-in/token-out upstream decodes, less the end-of-turn token.
    const text = qwen.decode(sampled.ids.slice(0, -1));
    const expected = {
      reasoning: sampled.reasoning,
      content: sampled.content,
      toolCalls: sampled.toolCalls.map((c, index) => ({ index, id: `call_${index}`, name: c.name, arguments: c.arguments })),
    };
    expect(parse(text, [])).toEqual(expected);
    for (let seed = 1; seed <= 20; seed++) expect(parse(text, randomCuts(text.length, seed))).toEqual(expected);
    // One character at a time, as the worst case of a stream.
    expect(
      parse(
        text,
        Array.from({ length: text.length }, (_, i) => i),
      ),
    ).toEqual(expected);
  });

  it('parses the Qwen3-Coder XML tool-call form', () => {
    const text =
      'I will list.\n<tool_call>\n<function=ls>\n<parameter=path>\nsrc/a b\n</parameter>\n<parameter=depth>\n2\n</parameter>\n</function>\n</tool_call>';
    expect(parse(text, randomCuts(text.length, 7), { format: 'qwen3-coder', idPrefix: 't' })).toEqual({
      reasoning: null,
      content: 'I will list.',
      toolCalls: [{ index: 0, id: 't0', name: 'ls', arguments: JSON.stringify({ path: 'src/a b', depth: 2 }) }],
    });
  });

  it('a tool call cut short by the token limit is text, not a call; a malformed one too', () => {
    expect(parse('ok\n<tool_call>\n{"name": "ls", "argu', [5])).toEqual({ reasoning: null, content: 'ok\n<tool_call>\n{"name": "ls", "argu', toolCalls: [] });
    expect(parse('<tool_call>not json</tool_call>', [])).toMatchObject({ content: '<tool_call>not json</tool_call>', toolCalls: [] });
  });

  it('starts inside reasoning when the template opened <think> in the prompt', () => {
    expect(parse('still thinking\n</think>\n\nanswer', [3], { format: 'hermes', idPrefix: 'c', startsInReasoning: true })).toEqual({
      reasoning: 'still thinking',
      content: 'answer',
      toolCalls: [],
    });
  });
});
