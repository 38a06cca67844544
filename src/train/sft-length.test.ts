import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { qwen3ModelDir } from '../core/bundled-tokenizer.js';
import { BUNDLED_QWEN3, loadChatTemplate } from '../upstream/tito/chat-template.js';
import { droppedExamples, exampleTokens, sftExampleLengths, sftLengthProblem, sftNeededSeqLen } from './sft-length.js';
import { removeTree } from '../../test/support/remove-tree.js';

const qwen3 = loadChatTemplate(BUNDLED_QWEN3, qwen3ModelDir);
const render = { addBos: true, addEos: true, addGenerationPrompt: false };
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-sft-length-'));
afterAll(() => removeTree(tmp));

describe('SFT example length, as NeMo-RL counts it (real Qwen3 template)', () => {
  it('sums the tokens each prefix render adds, from the first character that differs (llm_message_utils.py:546-640)', () => {
    const messages = [
      { role: 'user', content: 'add 2 and 3' },
      { role: 'assistant', content: '5', reasoning_content: 'two plus three is five' },
      { role: 'user', content: 'and 4?' },
      { role: 'assistant', content: '9', reasoning_content: 'five plus four' },
    ];
    // The chunks NeMo-RL takes, written out: rendered as the last turn, an assistant keeps its
    // reasoning; once a user follows, Qwen3 drops it, so the next render differs from inside that
    // turn and its tail is counted again.
    const chunks = [
      '<|im_start|>user\nadd 2 and 3<|im_end|>\n',
      '<|im_start|>assistant\n<think>\ntwo plus three is five\n</think>\n\n5<|im_end|>\n',
      '5<|im_end|>\n<|im_start|>user\nand 4?<|im_end|>\n',
      '<|im_start|>assistant\n<think>\nfive plus four\n</think>\n\n9<|im_end|>\n',
    ];
    const expected = chunks.reduce((n, c) => n + qwen3.encode(c).length, 0);
    expect(exampleTokens(qwen3, messages, undefined, render)).toBe(expected);
    // More than one render of the whole conversation counts: that is the point of counting NeMo-RL's way.
    expect(expected).toBeGreaterThan(qwen3.encode(qwen3.render(messages, { addGenerationPrompt: false })).length);
    // Qwen3 names no bos, and its turns already end with its eos (<|im_end|>): nothing added.
    expect([qwen3.bosToken, qwen3.eosToken]).toEqual([null, '<|im_end|>']);
  });

  it('tools are rendered into every prefix (as NeMo-RL passes them to each apply_chat_template call)', () => {
    const messages = [
      { role: 'user', content: 'list files' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'ls', arguments: '{"path": "."}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'a.txt' },
      { role: 'assistant', content: 'a.txt' },
    ];
    const tools = [
      { type: 'function', function: { name: 'ls', description: 'list a folder', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
    ];
    const bare = exampleTokens(qwen3, messages, undefined, render);
    const withTools = exampleTokens(qwen3, messages, tools, render);
    const system = qwen3.render([{ role: 'user', content: 'x' }], { tools, addGenerationPrompt: false }).split('<|im_start|>user')[0]!;
    expect(withTools - bare).toBe(qwen3.encode(system).length);
  });

  it('an example of max_seq_length tokens or more is dropped (length >= max_seq_length, processors.py:171-178): named, with the length that keeps it', () => {
    const data = path.join(tmp, 'sft.jsonl');
    const row = (text: string) =>
      JSON.stringify({
        messages: [
          { role: 'user', content: text },
          { role: 'assistant', content: 'ok' },
        ],
      });
    fs.writeFileSync(data, `${row('short')}\n\n${row('word '.repeat(3000))}\n${row('a little longer')}\n`);
    const lengths = sftExampleLengths(data, '/no/such/model', render, { HF_HOME: tmp });
    expect(lengths.tokenizer).toBe(BUNDLED_QWEN3);
    expect(lengths.note).toMatch(/bundled Qwen3/);
    expect(lengths.examples.map((e) => e.line)).toEqual([1, 3, 4]);
    const long = lengths.examples[1]!.tokens;
    expect(long).toBeGreaterThan(3000);
    // Exactly at the limit is dropped; one token more of room keeps it.
    expect(droppedExamples(lengths, long).map((e) => e.line)).toEqual([3]);
    expect(droppedExamples(lengths, long + 1)).toEqual([]);
    expect(sftNeededSeqLen(lengths)).toBe(Math.ceil((long + 1) / 1024) * 1024);
    expect(sftLengthProblem(lengths, 2048, data)).toBe(
      `1 of 3 SFT examples in sft.jsonl are 2048 tokens or longer (bundled:qwen3 template): line 3 (${long} tokens). NeMo-RL keeps such an example with loss_multiplier 0, cut short (data/processors.py:171-178): it trains nothing. Use --max-seq-len ${sftNeededSeqLen(lengths)} or more, or leave those examples out`,
    );
    expect(sftLengthProblem(lengths, sftNeededSeqLen(lengths), data)).toBeNull();
  });
});
