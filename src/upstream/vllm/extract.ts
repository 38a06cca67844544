import type { ChatCompletion, ChatCompletionChunk, ChatDelta, ChatLogprobs, ChatMessage } from '../../core/chat.js';
import { isRecord } from '../../core/chat.js';
import { expectChunkShape, expectCompletionShape } from '../chat-shape.js';
import type { CapturedTokens } from '../../core/tokens.js';
import type { TokenDelta } from '../../core/tokens.js';
import { idArray, logprobValue, promptIdArray } from '../token-fields.js';

/**
 * vLLM's token fields, read from replies and removed from what goes on to the harness.
 * Field placement (vLLM chat_completion/protocol.py and serving.py):
 * - non-streaming: top-level `prompt_token_ids`; `choices[i].token_ids`;
 *   `choices[i].logprobs.content[].logprob` (−inf is clamped by vLLM to −9999.0, so JSON stays finite).
 * - streaming: `prompt_token_ids` top-level on the first (role) chunk only; `choices[0].token_ids`
 *   on every content chunk and the finish chunk; usage on a last chunk with `choices: []`.
 * Only choice 0 is captured: the proxy refuses `n > 1`.
 */
const TOP_LEVEL_TRAINING_FIELDS = ['prompt_token_ids', 'prompt_logprobs', 'prompt_text', 'kv_transfer_params', 'ec_transfer_params'];
const CHOICE_TRAINING_FIELDS = ['token_ids', 'routed_experts'];

export function extractVllmCompletion(json: unknown): { completion: ChatCompletion; tokens: CapturedTokens } {
  const obj = expectCompletionShape(json);
  const choice = obj.choices[0];
  const promptIds = promptIdArray(obj.prompt_token_ids, 'prompt_token_ids');
  const sampledIds = choice ? idArray(choice.token_ids, 'choices[0].token_ids') : null;
  const logprobs = choice ? logprobValues(choice.logprobs as ChatLogprobs | null | undefined) : null;
  for (const field of TOP_LEVEL_TRAINING_FIELDS) delete obj[field];
  for (const c of obj.choices) {
    for (const field of CHOICE_TRAINING_FIELDS) delete c[field];
    if (isRecord(c.message)) renameReasoning(c.message as ChatMessage);
  }
  // A vLLM older than 0.10.2 ignores `return_token_ids`: without ids the call is text only.
  const source = promptIds || sampledIds ? 'upstream' : 'none';
  return {
    completion: obj,
    tokens: source === 'upstream' ? { source, promptIds, sampledIds, logprobs } : { source, promptIds: null, sampledIds: null, logprobs: null },
  };
}

export function extractVllmChunk(json: unknown): { chunk: ChatCompletionChunk; tokens: TokenDelta | null } {
  const obj = expectChunkShape(json);
  const tokens: TokenDelta = {};
  const promptIds = promptIdArray(obj.prompt_token_ids, 'prompt_token_ids');
  if (promptIds) tokens.promptIds = promptIds;
  const choice = obj.choices[0];
  if (choice) {
    const ids = idArray(choice.token_ids, 'choices[0].token_ids');
    if (ids) tokens.sampledIds = ids;
    const lps = logprobValues(choice.logprobs as ChatLogprobs | null | undefined);
    if (lps) tokens.logprobs = lps;
  }
  for (const field of TOP_LEVEL_TRAINING_FIELDS) delete obj[field];
  for (const c of obj.choices) {
    for (const field of CHOICE_TRAINING_FIELDS) delete c[field];
    if (isRecord(c.delta)) renameReasoning(c.delta as ChatDelta);
  }
  const any = tokens.promptIds || tokens.sampledIds || tokens.logprobs;
  return { chunk: obj, tokens: any ? tokens : null };
}

/** Newer vLLM names reasoning `reasoning`; harness histories and the canonical shape use `reasoning_content`. */
function renameReasoning(message: ChatMessage | ChatDelta): void {
  if (typeof message.reasoning === 'string' && message.reasoning_content == null) {
    message.reasoning_content = message.reasoning;
  }
  delete message.reasoning;
}

function logprobValues(logprobs: ChatLogprobs | null | undefined): number[] | null {
  const content = logprobs?.content;
  if (!Array.isArray(content)) return null;
  const out = new Array<number>(content.length);
  for (let i = 0; i < content.length; i++) {
    const lp = content[i]?.logprob;
    out[i] = logprobValue(lp);
  }
  return out;
}
