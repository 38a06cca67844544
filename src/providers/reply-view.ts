import type { ChatCompletion, ChatUsage } from '../core/chat.js';
import type { CapturedTokens } from '../core/tokens.js';

/** A finished reply in provider-neutral terms, read once from the canonical completion. */
export interface ReplyView {
  reasoning: string | null;
  text: string | null;
  toolCalls: { id: string; name: string; arguments: string }[];
  /** OpenAI finish reason: stop, length, tool_calls, content_filter, … */
  finishReason: string | null;
  /** vLLM's `stop_reason`: the stop string (or token id) that ended generation, when one did. */
  stopReason: string | number | null;
  promptTokens: number;
  completionTokens: number;
}

export function replyView(done: ChatCompletion, tokens: CapturedTokens, callId: string): ReplyView {
  const choice = done.choices[0];
  const message = choice?.message;
  const content = typeof message?.content === 'string' ? message.content : null;
  const reasoning = typeof message?.reasoning_content === 'string' ? message.reasoning_content : null;
  const toolCalls = (message?.tool_calls ?? []).map((call, i) => ({
    id: call.id || `call_${callId}_${i}`,
    name: call.function.name,
    arguments: call.function.arguments ?? '',
  }));
  const counts = usageCounts(done.usage, tokens);
  return {
    reasoning: reasoning && reasoning.length > 0 ? reasoning : null,
    text: content,
    toolCalls,
    finishReason: choice?.finish_reason ?? null,
    stopReason: (choice?.stop_reason as string | number | null | undefined) ?? null,
    ...counts,
  };
}

/** Token counts for provider usage fields: the captured ids when present, else the server's usage. */
export function usageCounts(usage: ChatUsage | null | undefined, tokens: CapturedTokens | null): { promptTokens: number; completionTokens: number } {
  return {
    promptTokens: tokens?.promptIds?.length ?? usage?.prompt_tokens ?? 0,
    completionTokens: tokens?.sampledIds?.length ?? usage?.completion_tokens ?? 0,
  };
}

/** Tool-call arguments as an object, for providers whose wire format carries parsed input. */
export function parseArguments(args: string): Record<string, unknown> {
  if (!args.trim()) return {};
  try {
    const parsed: unknown = JSON.parse(args);
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : { value: parsed };
  } catch {
    // The model wrote arguments that are not JSON; hand them over rather than drop the call.
    return { _raw: args };
  }
}
