import { isRecord, type ChatMessage, type ProviderName } from '../core/chat.js';
import { CODECS } from '../providers/codecs.js';
import { normalizeRequest } from '../providers/normalize.js';
import type { DecodeContext } from '../providers/types.js';
import type { RequestRecord } from '../store/requests.js';

/** A call's conversation in the canonical (OpenAI Chat) shape: the messages it sent and the tools it offered. */
export interface Conversation {
  messages: ChatMessage[];
  tools: unknown[];
}

/**
 * Looks up a Responses reply the proxy recorded, for calls that continue one (`previous_response_id`),
 * within the calling session only, as the proxy resolves it (recorded-response.ts).
 */
export type ResponseLookup = (responseId: string, sessionId: string) => ReturnType<NonNullable<DecodeContext['lookupResponse']>>;

/**
 * The conversation a call carried, whatever went upstream. Where the upstream request is a chat
 * request (vLLM chat, NeMo-RL, OpenAI-compatible), its `messages` and `tools` are what the server
 * rendered. Where polar sent token ids (vllm-tito, sglang-tito), the upstream request holds only
 * `prompt` ids, so the harness's own request is decoded by its provider's codec and normalized the
 * same way it was before polar rendered it. Returns a reason instead when neither is possible.
 */
export function callConversation(row: RequestRecord, lookup?: ResponseLookup): Conversation | { problem: string } {
  const upstream = row.upstreamRequest ? parse(row.upstreamRequest) : undefined;
  if (isRecord(upstream) && Array.isArray(upstream.messages)) {
    return { messages: upstream.messages as ChatMessage[], tools: Array.isArray(upstream.tools) ? upstream.tools : [] };
  }
  const codec = CODECS[row.provider as ProviderName];
  if (!codec) return { problem: `no codec for provider ${row.provider}` };
  if (!row.originalRequest) return { problem: 'the harness request was not recorded' };
  try {
    const decoded = codec.decodeRequest(parse(row.originalRequest), {
      path: row.path.split('?')[0]!,
      ...(lookup ? { lookupResponse: (id: string) => lookup(id, row.sessionId) } : {}),
    });
    const canonical = normalizeRequest(decoded, { contextWindow: null });
    return { messages: canonical.body.messages, tools: canonical.body.tools ?? [] };
  } catch (err) {
    return { problem: `the harness request could not be decoded (${(err as Error).message})` };
  }
}

export function isConversation(value: Conversation | { problem: string }): value is Conversation {
  return 'messages' in value;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
