import type { ChatMessage, ChatUsage } from '../core/chat.js';
import type { CapturedTokens } from '../core/tokens.js';
import type { StreamStep } from '../providers/stream-step.js';
import { TokenAccumulator } from '../upstream/accumulate.js';
import { assistantMessage } from './assistant-message.js';

/**
 * What a streamed call leaves for its record, gathered from the same steps the codec translates
 * (so its tool-call ids are the ones the harness received): the tokens, the reply as one canonical
 * assistant message, the finish reason, the usage and the model the server named.
 */
export class StreamCollector {
  private readonly tokens: TokenAccumulator;
  private content = '';
  private reasoning = '';
  private readonly calls = new Map<number, { id: string; name: string; arguments: string }>();
  finishReason: string | null = null;
  usage: ChatUsage | null = null;
  model: string | null = null;

  constructor(capturesTokens: boolean) {
    this.tokens = new TokenAccumulator(capturesTokens ? 'upstream' : 'none');
  }

  add({ chunk, tokens, events }: StreamStep): void {
    this.tokens.add(tokens);
    if (!this.model && typeof chunk.model === 'string') this.model = chunk.model;
    if (chunk.usage) this.usage = chunk.usage;
    for (const e of events) {
      if (e.kind === 'text') this.content += e.text;
      else if (e.kind === 'reasoning') this.reasoning += e.text;
      else if (e.kind === 'tool-start') this.calls.set(e.index, { id: e.id, name: e.name, arguments: '' });
      else if (e.kind === 'tool-args') {
        const call = this.calls.get(e.index);
        if (call) call.arguments += e.text;
      } else this.finishReason = e.reason;
    }
  }

  tokensSoFar(): CapturedTokens {
    return this.tokens.result();
  }

  message(): ChatMessage {
    return assistantMessage(this.content, this.reasoning, [...this.calls.values()]);
  }
}
