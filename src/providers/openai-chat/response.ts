import type { ChatCompletion, ChatCompletionChunk, ReplyRequest } from '../../core/chat.js';
import { idList, type CapturedTokens, type TokenDelta } from '../../core/tokens.js';

/**
 * The reply the harness gets: the upstream's completion with the model name it asked for, and
 * only the extras it asked for itself (logprobs, token ids), never the ones polar added.
 */
export function encodeChatResponse(done: ChatCompletion, req: ReplyRequest, tokens: CapturedTokens): ChatCompletion {
  const out: ChatCompletion = { ...done, model: req.requestedModel || done.model };
  out.choices = done.choices.map((choice) => {
    const c = { ...choice };
    if (!req.client.logprobs) delete c.logprobs;
    if (req.client.tokenIds && choice.index === 0 && tokens.sampledIds) c.token_ids = tokens.sampledIds;
    return c;
  });
  if (req.client.tokenIds && tokens.promptIds) out.prompt_token_ids = idList(tokens.promptIds);
  return out;
}

/** One streamed chunk for the harness, or null when it carries nothing the harness asked for. */
export function encodeChatChunk(
  chunk: ChatCompletionChunk,
  req: ReplyRequest,
  tokens: TokenDelta | null,
  toolIds: ReadonlyMap<number, string> | null = null,
): ChatCompletionChunk | null {
  // The usage-only chunk exists because polar asked for it; a harness that did not may index choices[0].
  if (chunk.choices.length === 0 && !req.client.includeUsage) return null;
  // Fields are left out by rest-spreading rather than deleted: a `delete` turns the copy into a
  // dictionary-mode object, which JSON.stringify then serialises on its slow path (every chunk).
  const { usage, ...rest } = chunk;
  const out: ChatCompletionChunk = { ...(req.client.includeUsage ? chunk : rest), model: req.requestedModel || chunk.model };
  out.choices = chunk.choices.map((choice) => {
    const { logprobs, ...withoutLogprobs } = choice;
    const c: typeof choice = req.client.logprobs ? { ...choice } : withoutLogprobs;
    // A tool call the server sent without an id gets the one polar recorded for it.
    if (toolIds && choice.index === 0 && c.delta?.tool_calls) {
      c.delta = {
        ...c.delta,
        tool_calls: c.delta.tool_calls.map((t, i) => (t.id ? t : { ...t, id: toolIds.get(typeof t.index === 'number' ? t.index : i) ?? t.id })),
      };
    }
    if (req.client.tokenIds && choice.index === 0 && tokens?.sampledIds) c.token_ids = tokens.sampledIds;
    return c;
  });
  if (req.client.tokenIds && tokens?.promptIds) out.prompt_token_ids = idList(tokens.promptIds);
  return out;
}
