import type { ChatCompletion, ChatCompletionChunk, ChatDelta } from '../../core/chat.js';
import type { CapturedTokens } from '../../core/tokens.js';
import type { UpstreamChunk } from '../types.js';

/**
 * A finished completion as canonical stream chunks, for servers that cannot stream: the message
 * (role, reasoning, text, whole tool calls, with all the token data), then the finish, then usage.
 */
export async function* completionChunks(done: ChatCompletion, tokens: CapturedTokens): AsyncGenerator<UpstreamChunk> {
  const choice = done.choices[0];
  const base = { id: done.id, object: 'chat.completion.chunk', created: done.created, model: done.model };
  const message = choice?.message;
  const delta: ChatDelta = { role: 'assistant' };
  if (typeof message?.reasoning_content === 'string' && message.reasoning_content) delta.reasoning_content = message.reasoning_content;
  if (typeof message?.content === 'string' && message.content) delta.content = message.content;
  if (message?.tool_calls?.length) {
    delta.tool_calls = message.tool_calls.map((c, index) => ({
      index,
      id: c.id ?? `call_${done.id}_${index}`,
      type: 'function',
      function: { name: c.function.name, arguments: c.function.arguments },
    }));
  }
  const tokenDelta =
    tokens.source === 'upstream'
      ? {
          ...(tokens.promptIds ? { promptIds: tokens.promptIds } : {}),
          ...(tokens.sampledIds ? { sampledIds: tokens.sampledIds } : {}),
          ...(tokens.logprobs ? { logprobs: tokens.logprobs } : {}),
        }
      : null;
  const first: ChatCompletionChunk = { ...base, choices: [{ index: 0, delta, finish_reason: null, logprobs: choice?.logprobs ?? null }] };
  yield { chunk: first, tokens: tokenDelta };
  const finish: ChatCompletionChunk['choices'][number] = { index: 0, delta: {}, finish_reason: choice?.finish_reason ?? 'stop' };
  if (choice?.stop_reason !== undefined) finish.stop_reason = choice.stop_reason;
  yield { chunk: { ...base, choices: [finish] }, tokens: null };
  if (done.usage) yield { chunk: { ...base, choices: [], usage: done.usage }, tokens: null };
}
