import { contentText } from '../core/chat.js';
import type { Qwen3 } from './qwen3.js';

/** A chat request as the mock reads it: what vLLM's `/v1/chat/completions` accepts, loosely typed. */
export interface ChatBody {
  model?: string;
  messages: { role: string; content?: unknown; [k: string]: unknown }[];
  tools?: unknown[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  logprobs?: boolean;
  top_logprobs?: number | null;
  return_token_ids?: boolean;
  return_tokens_as_token_ids?: boolean;
  max_tokens?: number;
  max_completion_tokens?: number;
  chat_template_kwargs?: { enable_thinking?: boolean };
  [k: string]: unknown;
}

export function textOf(content: unknown): string {
  return contentText(content, '\n');
}

/**
 * The prompt ids vLLM's chat endpoint would build for a request: the Qwen3 template over the
 * messages (text parts flattened into one string, as vLLM does for string-content templates), the
 * request's tools and `enable_thinking`, then the tokenizer without added special tokens.
 */
export function renderPrompt(qwen: Qwen3, chat: ChatBody, options: { addGenerationPrompt?: boolean } = {}): number[] {
  const messages = chat.messages.map((m) => ({ ...m, content: typeof m.content === 'string' || m.content == null ? (m.content ?? '') : textOf(m.content) }));
  const text = qwen.render(messages, {
    ...(chat.tools ? { tools: chat.tools } : {}),
    enableThinking: chat.chat_template_kwargs?.enable_thinking !== false,
    addGenerationPrompt: options.addGenerationPrompt ?? true,
  });
  return qwen.encode(text);
}
