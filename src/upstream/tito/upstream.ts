import type { CanonicalRequest, ChatMessage } from '../../core/chat.js';
import { PolarError } from '../../core/errors.js';
import { isDone, SseDataReader } from '../../core/sse/data-reader.js';
import { parseUpstreamJson } from '../chat-shape.js';
import { UpstreamHttp, type UpstreamBody, type UpstreamHttpOptions } from '../http.js';
import { listModels, normalizeBaseUrl } from '../openai-compatible.js';
import type { CallContext, CallOutcome, ServedModel, Upstream, UpstreamChunk, UpstreamCompletion, UpstreamKind, UpstreamRequest } from '../types.js';
import { BridgeUnavailable, bridgeTail, tailAfterTurn, type ChainEntry, type FullRenderReason } from './bridge.js';
import { ChainMemory, templateKwargs, type ChainMark } from './chain-memory.js';
import type { ChatTemplate, TemplateMessage } from './chat-template.js';
import { requestedMaxTokens, samplingOf, type Generation, type TokenInDialect } from './dialect.js';
import { ReplyAssembler } from './reply.js';

export interface TokenInOptions extends UpstreamHttpOptions {
  template: ChatTemplate;
  /**
   * Also render each bridged call's new messages after the whole history and fail the call if the
   * template gives other tokens than the short render did (a check for templates whose rendering
   * of a message depends on what came long before it). Costs a full render per call.
   */
  checkBridges?: boolean;
  /** false: render every call in full (for comparison in benchmarks; never drift-proof). */
  bridge?: boolean;
  /** What `--tokenizer` named, recorded on sessions (see Upstream.tokenizer). */
  tokenizer?: string;
}

/** What prepare() worked out, for the reply and for remembering the call. */
interface Prepared {
  callId: string;
  promptIds: number[];
  mark: ChainMark;
  startsInReasoning: boolean;
  clientLogprobs: boolean;
  stop: readonly string[];
  model: string;
}

/**
 * A token-in/token-out upstream: polar renders the chat template and sends token ids (vLLM
 * `/v1/completions`, SGLang `/generate`), bridges each call onto the one it continues, and parses
 * the sampled ids back into a reply. See bridge.ts for the prompt rule and reply.ts for the reply.
 */
export class TokenInUpstream implements Upstream {
  readonly kind: UpstreamKind;
  readonly baseUrl: string;
  readonly capturesTokens = true;
  readonly tokenizer?: string;
  private readonly http: UpstreamHttp;
  private readonly template: ChatTemplate;
  private readonly memory = new ChainMemory();
  private readonly prepared = new Map<string, Prepared>();
  private readonly checkBridges: boolean;
  private readonly bridge: boolean;

  constructor(
    private readonly dialect: TokenInDialect,
    options: TokenInOptions,
  ) {
    this.kind = dialect.kind;
    this.template = options.template;
    if (options.tokenizer) this.tokenizer = options.tokenizer;
    this.checkBridges = options.checkBridges ?? false;
    this.bridge = options.bridge ?? true;
    this.http = new UpstreamHttp({ ...options, baseUrl: normalizeBaseUrl(options.baseUrl) });
    this.baseUrl = this.http.url('');
  }

  prepare(req: CanonicalRequest, model: string, call: CallContext): UpstreamRequest {
    const messages = req.body.messages;
    const tools = req.body.tools;
    const kwargs = templateKwargs(req);
    const { search: found, mark } = this.memory.locate(call, messages, tools, kwargs, this.bridge);
    let built = found.parent ? this.bridged(found.parent, found.replyIndex, messages, tools, kwargs) : null;
    built ??= this.full(messages, tools, kwargs, found.parent ? 'template-unbridgeable' : found.reason);
    const { promptIds, opener, render } = built;
    const budget = replyBudget(req, promptIds.length, call.contextWindow ?? null, this.dialect.contextSlack);
    const body = this.dialect.body(promptIds, req, model, this.template.stopIds, budget);
    // Stored only once nothing more can throw: settle() is called for prepared calls alone.
    this.prepared.set(call.id, {
      callId: call.id,
      promptIds,
      mark,
      startsInReasoning: this.template.reasons && /<think>\s*$/.test(opener),
      clientLogprobs: req.client.logprobs,
      stop: samplingOf(req).stop,
      model,
    });
    return { path: this.dialect.path, stream: req.stream, body, text: JSON.stringify(body), render, callId: call.id };
  }

  /** The parent's prompt and sampled ids + the new messages' tokens; null when the template cannot say where the turn ends. */
  private bridged(
    parent: ChainEntry,
    replyIndex: number,
    messages: ChatMessage[],
    tools: readonly unknown[] | undefined,
    kwargs: Record<string, unknown>,
  ): Built | null {
    const newMessages = messages.slice(replyIndex + 1);
    let tail: { ids: number[]; text: string };
    try {
      tail = bridgeTail(this.template, parent, messages[replyIndex]!, newMessages, tools, kwargs);
    } catch (err) {
      if (err instanceof BridgeUnavailable) return null;
      throw templateError(this.template, err);
    }
    if (this.checkBridges) this.checkTail(tail.text, messages.slice(0, replyIndex + 1), newMessages, tools, kwargs, parent.callId);
    const promptIds = new Array<number>(parent.promptIds.length + parent.sampledIds.length + tail.ids.length);
    let n = 0;
    for (const id of parent.promptIds) promptIds[n++] = id;
    for (const id of parent.sampledIds) promptIds[n++] = id;
    for (const id of tail.ids) promptIds[n++] = id;
    return { promptIds, opener: tail.text, render: { mode: 'bridged', parentCallId: parent.callId, reason: null, renderedTokens: tail.ids.length } };
  }

  private full(messages: ChatMessage[], tools: readonly unknown[] | undefined, kwargs: Record<string, unknown>, reason: FullRenderReason): Built {
    const text = this.renderAll(messages, tools, kwargs);
    const promptIds = this.template.encode(text);
    return { promptIds, opener: text, render: { mode: 'full', parentCallId: null, reason, renderedTokens: promptIds.length } };
  }

  settle(call: CallContext, outcome: CallOutcome | null): void {
    const p = this.prepared.get(call.id);
    this.prepared.delete(call.id);
    if (p) this.memory.settle(call, p.mark, outcome);
  }

  async complete(req: UpstreamRequest, signal: AbortSignal): Promise<UpstreamCompletion> {
    const p = this.preparedFor(req);
    const g = await this.http.postAndRead(req.path, req.text, signal, req.headers, (bytes) => this.dialect.completion(parseUpstreamJson(bytes, 'reply')));
    if (g.finishReason === 'abort') throw aborted();
    return this.assembler(p).complete(g);
  }

  async stream(req: UpstreamRequest, signal: AbortSignal): Promise<AsyncIterable<UpstreamChunk>> {
    const p = this.preparedFor(req);
    const body = await this.http.postStream(req.path, req.text, signal, req.headers);
    return this.readStream(body, this.assembler(p));
  }

  private async *readStream(body: UpstreamBody, assembler: ReplyAssembler): AsyncGenerator<UpstreamChunk> {
    const sse = new SseDataReader();
    const read = this.dialect.streamReader();
    let usage: Generation['usage'] = null;
    const take = (data: Buffer): UpstreamChunk[] => {
      const g = read(parseUpstreamJson(data, 'stream event'));
      if (g.finishReason === 'abort') throw aborted();
      if (g.usage) usage = g.usage;
      return assembler.push(g);
    };
    let done = false;
    for await (const bytes of body) {
      for (const data of sse.push(bytes)) {
        if (isDone(data)) {
          done = true;
          body.release();
          break;
        }
        yield* take(data);
      }
      if (done) break;
    }
    if (!assembler.isFinished) throw new PolarError('POLAR_UPSTREAM_PROTOCOL', 'upstream stream ended before the reply finished', 502);
    yield assembler.usageChunk(usage);
  }

  async models(signal?: AbortSignal): Promise<ServedModel[]> {
    return listModels(this.http, signal);
  }

  /** Counted locally: polar renders and tokenizes prompts itself in this mode. */
  async countTokens(req: CanonicalRequest): Promise<number | null> {
    return this.template.encode(this.renderAll(req.body.messages, req.body.tools, templateKwargs(req))).length;
  }

  close(): Promise<void> {
    return this.http.close();
  }

  private renderAll(messages: CanonicalRequest['body']['messages'], tools: readonly unknown[] | undefined, kwargs: Record<string, unknown>): string {
    try {
      return this.template.render(messages as TemplateMessage[], { tools, addGenerationPrompt: true, kwargs });
    } catch (err) {
      throw templateError(this.template, err);
    }
  }

  private checkTail(
    short: string,
    history: CanonicalRequest['body']['messages'],
    newMessages: CanonicalRequest['body']['messages'],
    tools: readonly unknown[] | undefined,
    kwargs: Record<string, unknown>,
    parent: string,
  ): void {
    const full = tailAfterTurn(this.template, history as TemplateMessage[], newMessages, tools, kwargs);
    if (full !== short) {
      throw new PolarError(
        'POLAR_BRIDGE_CHECK',
        `bridge check failed after call ${parent}: the template renders the new messages as ${JSON.stringify(full.slice(0, 200))} after the whole history but ${JSON.stringify(short.slice(0, 200))} on their own`,
        500,
      );
    }
  }

  private preparedFor(req: UpstreamRequest): Prepared {
    const p = req.callId ? this.prepared.get(req.callId) : undefined;
    if (!p) throw new PolarError('POLAR_INTERNAL', 'token-in upstream: request was not prepared by this upstream', 500);
    return p;
  }

  private assembler(p: Prepared): ReplyAssembler {
    return new ReplyAssembler({
      template: this.template,
      promptIds: p.promptIds,
      callId: p.callId,
      model: p.model,
      created: Math.floor(Date.now() / 1000),
      startsInReasoning: p.startsInReasoning,
      clientLogprobs: p.clientLogprobs,
      stop: p.stop,
    });
  }
}

interface Built {
  promptIds: number[];
  /** The rendered text the prompt ends with (to see whether it opens reasoning). */
  opener: string;
  render: NonNullable<UpstreamRequest['render']>;
}

function templateError(template: ChatTemplate, err: unknown): PolarError {
  if (err instanceof PolarError) return err;
  return new PolarError('POLAR_BAD_REQUEST', `the chat template (${template.source}) cannot render this request: ${(err as Error).message}`, 400, {
    cause: err,
  });
}

const UNKNOWN_WINDOW_BUDGET = 4096;

/**
 * The reply's token budget: the harness's own, clamped to what the context leaves (polar knows the
 * prompt's exact length here), else everything the context leaves, as vLLM's chat endpoint does.
 * `slack`: context tokens the server will not hand out (the dialect's contextSlack).
 */
export function replyBudget(req: CanonicalRequest, promptTokens: number, contextWindow: number | null, slack = 0): number {
  const asked = requestedMaxTokens(req);
  // Unknown context (no max_model_len from the server, no --context-window): the harness's own
  // budget, else a modest default rather than the server's (16 on vLLM's completions endpoint).
  if (contextWindow === null) return asked ?? UNKNOWN_WINDOW_BUDGET;
  const room = contextWindow - slack - promptTokens;
  if (room < 1) {
    // Worded as vLLM words it ("This model's maximum context length is …"): harnesses recognise a
    // full context by that text (harnesses.md §1.8), and the codecs give it their context-length code.
    throw new PolarError(
      'POLAR_BAD_REQUEST',
      `This model's maximum context length is ${contextWindow} tokens; the prompt is ${promptTokens} tokens, which leaves no room for a reply`,
      400,
      {
        param: 'messages',
      },
    );
  }
  return asked === undefined ? room : Math.min(asked, room);
}

function aborted(): PolarError {
  return new PolarError('POLAR_UPSTREAM_STATUS', 'the upstream aborted the generation', 502);
}
