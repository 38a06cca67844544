import type { ChatCompletion, ChatCompletionChunk, ChatDelta, ChatLogprobs, ChatMessage, ChatUsage } from '../../core/chat.js';
import type { CapturedTokens } from '../../core/tokens.js';
import type { TokenDelta } from '../../core/tokens.js';
import type { UpstreamChunk } from '../types.js';
import type { ChatTemplate } from './chat-template.js';
import { IncrementalDetokenizer } from './detokenize.js';
import type { Generation } from './dialect.js';
import { OutputParser, type ParsedDelta } from './output-parser.js';
import { StopStringTrimmer } from './stop-strings.js';

export interface ReplyOptions {
  template: ChatTemplate;
  /** The prompt polar sent: the record's prompt ids when the server does not echo them. */
  promptIds: readonly number[];
  callId: string;
  model: string;
  created: number;
  /** The generation prompt opened `<think>`: the output starts inside reasoning. */
  startsInReasoning: boolean;
  /** Whether the harness asked for logprobs (its reply then carries them, per token). */
  clientLogprobs: boolean;
  /** The harness's stop strings. */
  stop: readonly string[];
}

/**
 * Turns a token-in/token-out server's sampled ids into canonical chat chunks (or one completion):
 * ids → text (incremental detokenizer) → reasoning / text / tool calls (output parser). Each chunk
 * carries the ids and logprobs of the piece it was made from, exactly as the server sent them. The
 * turn's end token is recorded but not shown.
 */
export class ReplyAssembler {
  private readonly detokenizer: IncrementalDetokenizer;
  private readonly stops: StopStringTrimmer;
  private readonly parser: OutputParser;
  private first = true;
  private finished = false;
  private sampled = 0;
  private prompt = 0;
  private heldSpecial: number[] = [];
  private readonly id: string;

  constructor(private readonly options: ReplyOptions) {
    const t = options.template;
    this.detokenizer = new IncrementalDetokenizer(t.decode);
    this.stops = new StopStringTrimmer(options.stop);
    this.parser = new OutputParser({ format: t.toolFormat ?? 'hermes', startsInReasoning: options.startsInReasoning, idPrefix: `call_${options.callId}_` });
    this.id = `chatcmpl-${options.callId}`;
  }

  /** One piece of the server's output as a canonical chunk (none when it carries nothing). */
  push(g: Generation): UpstreamChunk[] {
    const out: UpstreamChunk[] = [];
    const tokens: TokenDelta = {};
    if (this.first) {
      const promptIds = g.promptIds ?? [...this.options.promptIds];
      tokens.promptIds = promptIds;
      this.prompt = promptIds.length;
    }
    if (g.sampledIds.length > 0 || g.logprobs) {
      tokens.sampledIds = g.sampledIds;
      tokens.logprobs = g.logprobs ?? [];
    }
    this.sampled += g.sampledIds.length;
    const ending = g.finishReason !== null && !this.finished;
    const text = this.detokenizer.push(this.visible(g.sampledIds, g.finishReason !== null));
    const delta = this.delta(this.parser.push(ending ? this.rest(text, g) : this.stops.push(text)));
    if (ending) {
      this.finished = true;
      merge(delta, this.parser.end());
      out.push(this.chunk(delta, tokens, this.finishReason(g.finishReason ?? 'stop'), g.sampledIds, g.logprobs, g.stopReason));
    } else if (hasContent(delta) || Object.keys(tokens).length > 0) {
      out.push(this.chunk(delta, tokens, null, g.sampledIds, g.logprobs, null));
    }
    return out;
  }

  /** Usage for a stream whose server sent none: counted from the ids. */
  usage(reported: Generation['usage']): ChatUsage {
    const prompt = reported?.promptTokens ?? this.prompt;
    const completion = reported?.completionTokens ?? this.sampled;
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  }

  get isFinished(): boolean {
    return this.finished;
  }

  /** A whole non-streamed reply. */
  complete(g: Generation): { completion: ChatCompletion; tokens: CapturedTokens } {
    const text = this.rest(this.detokenizer.push(this.visible(g.sampledIds, true)), g);
    const parsed: ChatDelta = {};
    merge(parsed, this.parser.push(text));
    merge(parsed, this.parser.end());
    const message: ChatMessage = { role: 'assistant', content: parsed.content ?? (parsed.tool_calls ? null : '') };
    if (parsed.reasoning_content) message.reasoning_content = parsed.reasoning_content;
    if (parsed.tool_calls) {
      message.tool_calls = parsed.tool_calls.map((c) => ({
        id: c.id!,
        type: 'function',
        function: { name: c.function!.name!, arguments: c.function!.arguments! },
      }));
    }
    this.sampled = g.sampledIds.length;
    this.prompt = (g.promptIds ?? this.options.promptIds).length;
    const completion: ChatCompletion = {
      id: this.id,
      object: 'chat.completion',
      created: this.options.created,
      model: this.options.model,
      choices: [
        {
          index: 0,
          message,
          finish_reason: this.finishReason(g.finishReason ?? 'stop'),
          stop_reason: g.stopReason,
          logprobs: this.options.clientLogprobs ? this.logprobs(g.sampledIds, g.logprobs) : null,
        },
      ],
      usage: this.usage(g.usage),
    };
    return {
      completion,
      tokens: { source: 'upstream', promptIds: g.promptIds ?? [...this.options.promptIds], sampledIds: g.sampledIds, logprobs: g.logprobs },
    };
  }

  /** The usage chunk that ends a stream (as vLLM sends with `include_usage`). */
  usageChunk(usage: Generation['usage']): UpstreamChunk {
    return { chunk: { ...this.base(), choices: [], usage: this.usage(usage) }, tokens: null };
  }

  /**
   * Ids that reach the text: the token that stopped the turn is not part of the reply — a stop id,
   * or any special token the output ends with (the server may stop on eos ids from the model's
   * generation_config that the tokenizer files do not name). A piece ending in a special token
   * keeps it back until the next piece shows whether the output ended there.
   */
  private visible(ids: readonly number[], last: boolean): readonly number[] {
    const t = this.options.template;
    let out = this.heldSpecial.length > 0 ? [...this.heldSpecial, ...ids] : ids;
    this.heldSpecial = [];
    if (out.some((id) => t.stopIds.includes(id))) out = out.filter((id) => !t.stopIds.includes(id));
    const end = out[out.length - 1];
    if (end !== undefined && t.isSpecial(end)) {
      if (!last) this.heldSpecial = [end];
      out = out.slice(0, -1);
    }
    return out;
  }

  private finishReason(reason: string): string {
    if (reason === 'length') return 'length';
    return this.parser.toolCallCount > 0 ? 'tool_calls' : 'stop';
  }

  private delta(parsed: ParsedDelta): ChatDelta {
    const delta: ChatDelta = {};
    if (this.first) {
      delta.role = 'assistant';
      this.first = false;
    }
    merge(delta, parsed);
    return delta;
  }

  /** The output's last text with everything held back, cut at the stop string the server matched. */
  private rest(text: string, g: Generation): string {
    return this.stops.end(text + this.detokenizer.end(), typeof g.stopReason === 'string' ? g.stopReason : null);
  }

  private chunk(
    delta: ChatDelta,
    tokens: TokenDelta,
    finish: string | null,
    ids: readonly number[],
    lps: number[] | null,
    stopReason: Generation['stopReason'],
  ): UpstreamChunk {
    const choice: ChatCompletionChunk['choices'][number] = {
      index: 0,
      delta,
      finish_reason: finish,
      logprobs: this.options.clientLogprobs ? this.logprobs(ids, lps) : null,
    };
    if (finish) choice.stop_reason = stopReason;
    const chunk: ChatCompletionChunk = { ...this.base(), choices: [choice] };
    return { chunk, tokens: Object.keys(tokens).length > 0 ? tokens : null };
  }

  private logprobs(ids: readonly number[], lps: number[] | null): ChatLogprobs | null {
    if (!lps) return null;
    return { content: ids.map((id, i) => ({ token: this.options.template.decode([id]), logprob: lps[i]!, top_logprobs: [] })) };
  }

  private base() {
    return { id: this.id, object: 'chat.completion.chunk', created: this.options.created, model: this.options.model };
  }
}

/** Adds a parsed piece to a delta (as text, reasoning and whole tool calls). */
function merge(delta: ChatDelta, parsed: ParsedDelta): void {
  if (parsed.reasoning) delta.reasoning_content = (delta.reasoning_content ?? '') + parsed.reasoning;
  if (parsed.content) delta.content = (delta.content ?? '') + parsed.content;
  if (parsed.toolCalls) {
    delta.tool_calls = [
      ...(delta.tool_calls ?? []),
      ...parsed.toolCalls.map((c) => ({ index: c.index, id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })),
    ];
  }
}

function hasContent(delta: ChatDelta): boolean {
  return delta.role !== undefined || delta.content !== undefined || delta.reasoning_content !== undefined || delta.tool_calls !== undefined;
}
