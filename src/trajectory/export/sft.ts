import { isRecord } from '../../core/chat.js';
import type { RequestRecord } from '../../store/requests.js';

/** One supervised example in NeMo-RL's `openai_format`: the conversation and the tools offered. */
export interface SftExample {
  messages: unknown[];
  tools: unknown[];
}

/**
 * A trace's last call holds the whole conversation as the harness sent it (in the canonical chat
 * shape that went upstream) plus the reply it got (recorded as a canonical assistant message):
 * together, the chain as one example. Null when the call predates recorded assistant messages.
 */
export function sftExample(lastCall: RequestRecord): SftExample | null {
  if (!lastCall.upstreamRequest || !isRecord(lastCall.assistantMessage)) return null;
  const request = JSON.parse(lastCall.upstreamRequest) as { messages?: unknown[]; tools?: unknown[] };
  if (!Array.isArray(request.messages)) return null;
  return { messages: [...request.messages, lastCall.assistantMessage], tools: Array.isArray(request.tools) ? request.tools : [] };
}
