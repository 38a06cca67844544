import type { CanonicalRequest, ChatCompletion, ChatCompletionChunk } from '../../core/chat.js';
import type { CapturedTokens } from '../../core/tokens.js';
import type { TokenDelta } from '../../upstream/types.js';

/**
 * The reply the harness gets: the upstream's completion with the model name it asked for, and
 * only the extras it asked for itself (logprobs, token ids), never the ones polar added.
 */
export function encodeChatResponse(done: ChatCompletion, req: CanonicalRequest, tokens: CapturedTokens): ChatCompletion {
  const out: ChatCompletion = { ...done, model: req.requestedModel || done.model };
  out.choices = done.choices.map((choice) => {
    const c = { ...choice };
    if (!req.client.logprobs) delete c.logprobs;
    if (req.client.tokenIds && choice.index === 0 && tokens.sampledIds) c.token_ids = tokens.sampledIds;
    return c;
  });
  if (req.client.tokenIds && tokens.promptIds) out.prompt_token_ids = tokens.promptIds;
  return out;
}

/** One streamed chunk for the harness, or null when it carries nothing the harness asked for. */
export function encodeChatChunk(
  chunk: ChatCompletionChunk,
  req: CanonicalRequest,
  tokens: TokenDelta | null,
): ChatCompletionChunk | null {
  // The usage-only chunk exists because polar asked for it; a harness that did not may index choices[0].
  if (chunk.choices.length === 0 && !req.client.includeUsage) return null;
  const out: ChatCompletionChunk = { ...chunk, model: req.requestedModel || chunk.model };
  if (!req.client.includeUsage) delete out.usage;
  out.choices = chunk.choices.map((choice) => {
    const c = { ...choice };
    if (!req.client.logprobs) delete c.logprobs;
    if (req.client.tokenIds && choice.index === 0 && tokens?.sampledIds) c.token_ids = tokens.sampledIds;
    return c;
  });
  if (req.client.tokenIds && tokens?.promptIds) out.prompt_token_ids = tokens.promptIds;
  return out;
}
