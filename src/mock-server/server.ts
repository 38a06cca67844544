import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { Router } from '../core/http/router.js';
import { sendJson, sendText } from '../core/http/send.js';
import { HttpGuard, listenGuarded } from '../core/http/guard.js';
import { chatCompletion, chatStream } from './chat.js';
import {
  completionRequestError,
  completionResponse,
  completionScores,
  completionStream,
  COMPLETIONS_DEFAULT_MAX_TOKENS,
  type CompletionRequest,
} from './completions.js';
import { vllmError, type ReplyContext } from './context.js';
import { generateRequestError, generateResults, generateScores, generateStream, maxNewTokens, sglangError, type GenerateRequest } from './generate.js';
import type { PolicyShift } from './policy.js';
import { messagesToLastAssistant, NemoRlAssertion, nemoRlSamplingError, replacePrefixTokens, requiredPrefix, type NemoRlSampling } from './nemo-rl.js';
import { parsePrompt } from './prompt-parser.js';
import { chatRequestError, MockBadRequest, parseRequestBody } from './request-check.js';
import { loadQwen3, type Qwen3 } from './qwen3.js';
import { renderPrompt, type ChatBody } from './render.js';
import { logprobsFor, sampleReply, type SampledReply, type ScriptedReply } from './sampler.js';
import { demoScript } from './script.js';
import { taskScript, type CallMeta, type MockTask } from './tasks.js';
import { sleep, writeSse, type FaultMode } from './sse.js';
import { tokenOut } from './token-out.js';

/**
 * `polar mock-server`: a scripted stand-in for a vLLM (or SGLang, or NeMo-RL) server, for trying
 * polar and testing harness integrations without a GPU. It is not a model: replies follow a script
 * (see script.ts). Everything else is real: prompts are rendered with the real Qwen3 chat template
 * and tokenizer, sampled ids include non-canonical token splits (so a recording made by
 * re-tokenizing text would not match), and it speaks the servers' own wire formats:
 *
 * - vLLM `/v1/chat/completions` (chat.ts): `return_token_ids` → top-level `prompt_token_ids` and
 *   `choices[].token_ids`, `logprobs` + `top_logprobs` → `logprobs.content[]`; `/v1/models` with
 *   `max_model_len`; `/tokenize` with `messages`;
 * - vLLM `/v1/completions` with a token-id `prompt` (completions.ts) and SGLang `/generate` with
 *   `input_ids` (generate.ts), for token-in/token-out clients. The prompt ids are read back into the
 *   chat request they render (prompt-parser.ts), so for the same conversation these endpoints
 *   sample exactly what `/v1/chat/completions` would: same script answer, same ids, same logprobs
 *   (every endpoint shares one reply counter, which seeds them). Text prompts are refused (400);
 * - with `nemoRl`, NeMo-RL's vLLM HTTP server instead (nemo-rl.ts): only `/v1/chat/completions`
 *   and `/tokenize`, its sampling-parameter asserts, token ids on the message, `token_id:N` logprob
 *   tokens, and `required_prefix_token_ids` spliced into the prompt.
 *
 * It logs every call it served, and misbehaves on command (for polar's own fault tests).
 */

export type { FaultMode } from './sse.js';
export { textOf, type ChatBody } from './render.js';

export interface MockServerOptions {
  model?: string;
  /** The served model's window (`max_model_len`), as `/v1/models` lists it and the chat endpoint enforces it (default MAX_MODEL_LEN). */
  maxModelLen?: number;
  /** More models `/v1/models` lists after the served one, each with its own window (a multi-model server). */
  alsoListed?: readonly { id: string; maxModelLen: number }[];
  /** Decides each reply; defaults to the demo task (script.ts), or the tasks below. */
  script?: (body: ChatBody, callIndex: number, meta: CallMeta) => ScriptedReply;
  /** Rollout tasks with scripted correct and wrong solutions (tasks.ts), chosen per session. */
  tasks?: readonly MockTask[];
  /** Seeds which solution a task's first session gets. */
  seed?: number;
  host?: string;
  port?: number;
  /** Required on every request when set; required to exist when `host` is not loopback. */
  authToken?: string | null;
  /** Host names callers may reach it by, besides its address and loopback names. */
  allowHosts?: readonly string[];
  splitEvery?: number;
  /** Sampled tokens per streamed chunk. */
  chunkTokens?: number;
  chunkDelayMs?: number;
  /** Delay before the reply's first byte, standing in for prefill and generation time. */
  latencyMs?: number;
  /** Benchmark mode: no template or tokenizer work; synthetic ids sized like the request. */
  fast?: boolean;
  /** vLLM ≥ 0.10 names it `reasoning`; older versions `reasoning_content`. */
  reasoningField?: 'reasoning' | 'reasoning_content';
  /** Log request bodies (off for benchmarks, where they would pile up). */
  log?: boolean;
  /**
   * How long an idle kept-alive connection stays open (Node's default: 5 s, like uvicorn's). 0: until
   * the client closes it. The benchmark's upstream uses 0: its event loop is busy for seconds at
   * c=64, and an idle timer that fires then closes sockets with a request already sent on them.
   */
  keepAliveTimeoutMs?: number;
  /** Behave as NeMo-RL's vLLM HTTP server, trained with this (temperature, top_p). */
  nemoRl?: NemoRlSampling;
  /** A second policy for re-scoring tests: logprobs shifted by `delta` at every `every`-th position. */
  policyShift?: PolicyShift;
  /**
   * Hold every reply until `release()`: a stream before body chunk `holdAt` (0: before the first
   * token, as in a long prefill), an unstreamed reply before it is sent. Lets tests assert the order
   * of events (the harness got its first event while the server was still generating) without clocks.
   */
  holdAt?: number;
}

export interface LoggedCall {
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The chat request the script was asked about (for token-in endpoints: read back from the prompt). */
  body: ChatBody;
  /** The request body as received. */
  request: Record<string, unknown>;
  promptIds: number[];
  /** The reply as sampled, logged before its first byte is written: a reply cut on the way is here whole. */
  reply: SampledReply;
  /** Whether the reply was written to its end; false: the connection closed first (a fault, a client that left); unset while it is being sent. */
  whole?: boolean;
}

export interface MockServer {
  url: string;
  model: string;
  /** The served model's window (`max_model_len`): what a NeMo-RL-shaped server, which lists no models, is run with (`--context-window`). */
  maxModelLen: number;
  calls: LoggedCall[];
  /** Requests seen, including ones that failed on purpose. */
  requestCount(): number;
  /** `/tokenize` calls seen. */
  tokenizeCount(): number;
  /** The next `count` generation requests (any endpoint) misbehave this way. */
  fault(mode: FaultMode, count?: number): void;
  /** Resolves when the server has seen the client go away for a stalled or slow request. */
  clientGone(): Promise<void>;
  /** With `holdAt`: resolves once a reply is being held. */
  held(): Promise<void>;
  /** With `holdAt`: lets every held reply go on. */
  release(): void;
  close(): Promise<void>;
}

export const MAX_MODEL_LEN = 40_960;

/** The generation endpoints: vLLM's chat and token-in completions, SGLang's `/generate`. */
type Route = 'chat' | 'completions' | 'generate';

/** One mock server's state: its options, what it has served, and its pending faults. No globals. */
interface MockState {
  readonly options: MockServerOptions;
  readonly model: string;
  readonly qwen: Qwen3 | undefined;
  readonly nemoRl: NemoRlSampling | undefined;
  readonly reply: ReplyContext;
  readonly calls: LoggedCall[];
  readonly faults: FaultMode[];
  seen: number;
  replies: number;
  tokenizeCalls: number;
  goneWaiters: (() => void)[];
  /** What decides each reply: the given script, the task scripts, or the demo task. */
  readonly script: NonNullable<MockServerOptions['script']>;
  /** Held replies' resumptions, and tests waiting for a reply to be held (`holdAt`). */
  gate: { held: (() => void)[]; waiting: (() => void)[] };
}

export async function startMockServer(options: MockServerOptions = {}): Promise<MockServer> {
  const model = options.model ?? 'Qwen/Qwen3-8B';
  const qwen = options.fast ? undefined : loadQwen3();
  const state: MockState = {
    options,
    model,
    qwen,
    nemoRl: options.nemoRl,
    reply: {
      model,
      qwen,
      chunkTokens: Math.max(1, options.chunkTokens ?? 2),
      reasoningField: options.reasoningField ?? 'reasoning',
      tokensAsIds: options.nemoRl !== undefined,
    },
    calls: [],
    faults: [],
    seen: 0,
    replies: 0,
    tokenizeCalls: 0,
    goneWaiters: [],
    gate: { held: [], waiting: [] },
    script: options.script ?? (options.tasks && options.tasks.length > 0 ? taskScript(options.tasks, options.seed ?? 0) : demoScript),
  };
  const sockets = new Set<import('node:net').Socket>();
  const host = options.host ?? '127.0.0.1';
  // The browser checks every polar server makes (http-guard.ts), and a token beyond loopback.
  const guard = new HttpGuard({ host, token: options.authToken ?? null, allowHosts: options.allowHosts ?? [], what: 'polar mock-server' });
  const router = mockRoutes(state.nemoRl !== undefined);
  const server = http.createServer((req, res) => {
    const refusal = guard.check(req);
    if (refusal) {
      req.resume();
      sendJson(res, refusal.status, vllmError(refusal.message, refusal.status === 401 ? 'AuthenticationError' : 'PermissionDeniedError', refusal.status));
      return;
    }
    void handle(state, router, req, res).catch((err) => {
      if (res.headersSent) res.destroy();
      // An assert in NeMo-RL's handlers reaches Starlette's catch-all.
      else if (err instanceof NemoRlAssertion) sendText(res, 500, 'Internal Server Error');
      else if (err instanceof MockBadRequest) sendJson(res, 400, vllmError(err.message, 'BadRequestError', 400, err.param));
      else sendJson(res, 500, vllmError(String(err), 'InternalServerError', 500));
    });
  });
  if (options.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = options.keepAliveTimeoutMs;
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  const { port } = await listenGuarded(server, guard, host, options.port ?? 0);
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    model,
    maxModelLen: options.maxModelLen ?? MAX_MODEL_LEN,
    calls: state.calls,
    requestCount: () => state.seen,
    tokenizeCount: () => state.tokenizeCalls,
    fault(mode, count = 1) {
      for (let i = 0; i < count; i++) state.faults.push(mode);
    },
    clientGone: () => new Promise<void>((resolve) => state.goneWaiters.push(resolve)),
    held: () => new Promise<void>((resolve) => (state.gate.held.length > 0 ? resolve() : state.gate.waiting.push(resolve))),
    release() {
      for (const resume of state.gate.held.splice(0)) resume();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

type MockHandler = (state: MockState, req: IncomingMessage, res: ServerResponse, text: string) => Promise<void> | void;

/** vLLM's routes; NeMo-RL's server has only the chat endpoint and `/tokenize`. */
function mockRoutes(nemoRl: boolean): Router<MockHandler> {
  const router = new Router<MockHandler>().on('POST', '/tokenize', tokenize).on('POST', '/v1/chat/completions', generation('chat'));
  if (nemoRl) return router;
  return router.on('GET', '/v1/models', models).on('POST', '/v1/completions', generation('completions')).on('POST', '/generate', generation('generate'));
}

async function handle(state: MockState, router: Router<MockHandler>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const text = await readAll(req);
  // The request target as sent, query and all: vLLM's routes take none.
  const route = router.match(req.method ?? 'GET', req.url ?? '');
  if (route.found) return route.handler(state, req, res, text);
  // FastAPI's bare 404 under NeMo-RL, vLLM's error object otherwise; neither answers 405.
  if (state.nemoRl) sendJson(res, 404, { detail: 'Not Found' });
  else sendJson(res, 404, vllmError('Not Found', 'NotFoundError', 404));
}

function models(state: MockState, _req: IncomingMessage, res: ServerResponse): void {
  const listed = [{ id: state.model, maxModelLen: state.options.maxModelLen ?? MAX_MODEL_LEN }, ...(state.options.alsoListed ?? [])];
  sendJson(res, 200, { object: 'list', data: listed.map((m) => ({ id: m.id, object: 'model', created: 0, owned_by: 'vllm', max_model_len: m.maxModelLen })) });
}

/** vLLM's /tokenize with `messages`: the prompt the chat endpoint would render, counted. */
function tokenize(state: MockState, _req: IncomingMessage, res: ServerResponse, text: string): void {
  state.tokenizeCalls++;
  const chat = parseRequestBody(text) as ChatBody;
  const ids = state.qwen ? chatPrompt(state, state.qwen, chat) : syntheticPrompt(text.length);
  sendJson(res, 200, { count: ids.length, max_model_len: MAX_MODEL_LEN, tokens: ids });
}

/** What one generation reply needs besides the request: its pending fault, timing, and how it answers and logs. */
interface Generation {
  readonly stream: boolean;
  readonly fault: FaultMode | undefined;
  readonly timing: { latencyMs?: number; chunkDelayMs?: number; beforeChunk?: (i: number) => Promise<void> | undefined };
  readonly meta: CallMeta;
  reply(value: unknown): Promise<void>;
  log(body: ChatBody, promptIds: number[], reply: SampledReply): void;
}

/** A generation endpoint: checks, faults on command, then the scripted reply. */
function generation(route: Route): MockHandler {
  return async (state, req, res, text) => {
    const { options } = state;
    state.seen++;
    const request = parseRequestBody(text);
    if (route === 'chat') {
      const wrong = chatRequestError(request);
      if (wrong) throw wrong;
    }
    const stream = request.stream === true;
    const rejected = rejection(state, route, request);
    if (rejected) {
      if (rejected.status === 500) sendText(res, 500, 'Internal Server Error');
      else sendJson(res, rejected.status, rejected.body);
      return;
    }
    const fault = state.faults.shift();
    res.on('close', () => {
      if (!res.writableFinished) {
        const waiters = state.goneWaiters;
        state.goneWaiters = [];
        for (const w of waiters) w();
      }
    });
    if (answerFault(state, fault, route, stream, req, res)) return;
    // vLLM answers a stream's headers at once and its first chunk after prefill; a plain call waits.
    if (options.latencyMs && !stream) await sleep(options.latencyMs);
    const session = req.headers['x-polar-session'];
    const g: Generation = {
      stream,
      fault,
      timing: {
        latencyMs: options.latencyMs,
        chunkDelayMs: options.chunkDelayMs,
        ...(options.holdAt !== undefined ? { beforeChunk: (i: number) => (i === options.holdAt ? hold(state) : undefined) } : {}),
      },
      meta: { session: typeof session === 'string' ? session : null },
      reply: async (value) => {
        if (options.holdAt !== undefined) await hold(state);
        sendJson(res, 200, value);
      },
      log: (body, promptIds, reply) => {
        if (options.log === false) return;
        const call: LoggedCall = { path: req.url!, headers: req.headers, body, request, promptIds, reply };
        state.calls.push(call);
        // Known only when the response closes: a check that compares stored calls with this log
        // must not take a reply the client never got whole for one it did.
        res.once('close', () => {
          call.whole = res.writableFinished;
        });
      },
    };
    if (route === 'chat') await chatReply(state, res, request as ChatBody, text, g);
    else await tokenInReply(state, res, route, request as CompletionRequest & GenerateRequest, g);
  };
}

async function chatReply(state: MockState, res: ServerResponse, chat: ChatBody, text: string, g: Generation): Promise<void> {
  const { qwen, nemoRl } = state;
  const promptIds = qwen ? chatPrompt(state, qwen, chat) : syntheticPrompt(text.length);
  const window = state.options.maxModelLen ?? MAX_MODEL_LEN;
  // vLLM refuses a prompt that leaves no room in the window (serving_engine's length check).
  if (promptIds.length >= window) {
    sendJson(
      res,
      400,
      vllmError(
        `This model's maximum context length is ${window} tokens. However, your request has ${promptIds.length} input tokens. Please reduce the length of the input messages.`,
        'BadRequestError',
        400,
      ),
    );
    return;
  }
  const served = state.replies++;
  let maxTokens = chat.max_completion_tokens ?? chat.max_tokens ?? undefined;
  // NeMo-RL clamps the request's budget to what the context leaves; vLLM gives an absent one the rest of the window.
  maxTokens = Math.min(maxTokens ?? window, window - promptIds.length);
  const sampled = sample(state, chat, served, maxTokens, g.meta, promptIds);
  g.log(chat, promptIds, sampled);
  const id = `chatcmpl-${served.toString(16).padStart(8, '0')}`;
  if (g.stream) await writeSse(res, chatStream(state.reply, chat, id, promptIds, sampled), g.fault, g.timing);
  else await g.reply(chatCompletion(state.reply, chat, id, promptIds, sampled, nemoRl !== undefined));
}

/** Token in: read the conversation back out of the ids, ask the script as the chat endpoint would. */
async function tokenInReply(state: MockState, res: ServerResponse, route: Route, body: CompletionRequest & GenerateRequest, g: Generation): Promise<void> {
  const { qwen } = state;
  const ctx = state.reply;
  const startedAt = Date.now();
  const promptIds = (route === 'completions' ? body.prompt : body.input_ids) as number[];
  // Scoring given ids (vLLM prompt_logprobs, SGLang logprob_start_len): the policy's logprobs of the
  // prompt itself; nothing is read back or asked of the script.
  if (scores(route, body)) {
    const shift = state.options.policyShift;
    sendJson(res, 200, route === 'completions' ? completionScores(ctx, body, promptIds, shift) : generateScores(body, promptIds, shift));
    return;
  }
  const chat: ChatBody = qwen ? { ...parsePrompt(qwen.decode(promptIds)), ...(typeof body.model === 'string' ? { model: body.model } : {}) } : { messages: [] };
  const maxTokens = route === 'completions' ? (body.max_tokens ?? COMPLETIONS_DEFAULT_MAX_TOKENS) : maxNewTokens(body);
  const served = state.replies++;
  const sampled = sample(state, chat, served, maxTokens, g.meta, promptIds);
  g.log(chat, promptIds, sampled);
  const stopIds = (route === 'completions' ? body.stop_token_ids : body.sampling_params?.stop_token_ids) ?? [];
  const out = tokenOut(sampled, stopIds, qwen?.eosId);
  if (route === 'completions') {
    const id = `cmpl-${served.toString(16).padStart(8, '0')}`;
    if (g.stream) await writeSse(res, completionStream(ctx, body, id, promptIds, out), g.fault, g.timing);
    else await g.reply(completionResponse(ctx, body, id, promptIds, out));
    return;
  }
  const rid = typeof body.rid === 'string' ? body.rid : served.toString(16).padStart(32, '0');
  const results = generateResults(ctx, body, rid, promptIds, out, startedAt);
  if (g.stream) await writeSse(res, generateStream(results), g.fault, g.timing);
  else await g.reply(results[results.length - 1]);
}

/** A request that asks for the logprobs of its own prompt (re-scoring), not for a generation. */
function scores(route: Route, body: CompletionRequest & GenerateRequest): boolean {
  if (route === 'completions') return typeof body.prompt_logprobs === 'number' || (body.echo === true && typeof body.logprobs === 'number');
  return route === 'generate' && body.return_logprob === true && typeof body.logprob_start_len === 'number' && body.logprob_start_len >= 0;
}

/** Holds a reply until the test calls `release()`, telling whoever waits for `held()`. */
function hold(state: MockState): Promise<void> {
  const resumed = new Promise<void>((resolve) => state.gate.held.push(resolve));
  for (const w of state.gate.waiting.splice(0)) w();
  return resumed;
}

/** Faults that strike before a reply starts (the streaming ones strike inside writeSse); true when answered. */
function answerFault(state: MockState, fault: FaultMode | undefined, route: Route, stream: boolean, req: IncomingMessage, res: ServerResponse): boolean {
  if (fault === 'http-500') {
    sendJson(
      res,
      500,
      route === 'generate' ? sglangError('EngineCore encountered an issue') : vllmError('EngineCore encountered an issue', 'InternalServerError', 500),
    );
    return true;
  }
  if (fault === 'http-400-context') {
    sendJson(res, 400, contextError(state, route));
    return true;
  }
  if (stream) return false;
  if (fault === 'drop') {
    req.socket.destroy();
    return true;
  }
  if (fault === 'stall') return true; // never answers
  if (fault === 'bad-json') {
    // Not sendJson on purpose: this fault sends a truncated body that is not JSON.
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(route === 'generate' ? '{"text": "broken", "meta_info": {' : '{"id": "chatcmpl-broken", "choices": [');
    return true;
  }
  return false;
}

/** A request the server turns away before generating: status and body. */
function rejection(state: MockState, route: Route, request: Record<string, unknown>): { status: number; body: unknown } | null {
  if (route === 'completions') {
    const error = completionRequestError(request as CompletionRequest) ?? vocabularyError(state, request.prompt as number[]);
    return error ? { status: 400, body: vllmError(error, 'BadRequestError', 400) } : null;
  }
  if (route === 'generate') {
    const error = generateRequestError(request as GenerateRequest, MAX_MODEL_LEN) ?? vocabularyError(state, request.input_ids as number[]);
    return error ? { status: 400, body: sglangError(error) } : null;
  }
  if (!state.nemoRl) return null;
  const chat = request as ChatBody;
  if (nemoRlSamplingError(chat, state.nemoRl)) return { status: 500, body: null };
  if (chat.logprobs && chat.top_logprobs === null && !chat.stream) {
    return {
      status: 400,
      body: vllmError('`top_logprobs` must be set when requesting token information from the NeMo-RL chat endpoint.', 'BadRequestError', 400, 'top_logprobs'),
    };
  }
  return null;
}

/** vLLM's input check: every prompt id must be a token of the model. */
function vocabularyError(state: MockState, ids: number[]): string | null {
  const bad = state.qwen ? ids.find((id) => state.qwen!.tokenString(id) === undefined) : undefined;
  return bad === undefined ? null : `Token id ${bad} is out of vocabulary`;
}

function contextError(state: MockState, route: Route) {
  const message = "This model's maximum context length is 40960 tokens. However, you requested 50000 tokens.";
  if (route === 'generate') return sglangError("The input (50000 tokens) is longer than the model's context length (40960 tokens).");
  // NeMo-RL turns vLLM's length error into its own 400 body.
  if (state.nemoRl) return { error: { message, type: 'invalid_request_error', code: 400 } };
  return vllmError(message, 'BadRequestError', 400);
}

/** The chat endpoint's prompt; under NeMo-RL, with the required prefix spliced in. */
function chatPrompt(state: MockState, q: Qwen3, chat: ChatBody): number[] {
  const full = renderPrompt(q, chat);
  const prefix = state.nemoRl ? requiredPrefix(chat) : null;
  if (!prefix) return full;
  const templatePrefix = renderPrompt(q, { ...chat, messages: messagesToLastAssistant(chat.messages) }, { addGenerationPrompt: false });
  return replacePrefixTokens(q.eosId, prefix, templatePrefix, full);
}

function sample(state: MockState, chat: ChatBody, served: number, maxTokens: number | undefined, meta: CallMeta, promptIds: readonly number[]): SampledReply {
  if (!state.qwen) return syntheticReply(maxTokens);
  return sampleReply(state.qwen, state.script(chat, served, meta), {
    context: promptIds,
    ...(state.options.policyShift ? { shift: state.options.policyShift } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    splitEvery: state.options.splitEvery ?? 3,
    seed: served + 1,
    // Unique per reply whether or not calls are logged: harnesses drop a tool call whose id
    // they have already seen.
    callId: `${served}x`,
  });
}

function syntheticPrompt(bytes: number): number[] {
  const n = Math.max(1, Math.floor(bytes / 4));
  const ids = new Array<number>(n);
  for (let i = 0; i < n; i++) ids[i] = (i * 7919) % 151_000;
  return ids;
}

function syntheticReply(maxTokens: number | undefined): SampledReply {
  const n = Math.min(maxTokens ?? 32, 32);
  const ids = Array.from({ length: n }, (_, i) => 1000 + i);
  return {
    segments: [{ kind: 'content', ids }],
    ids,
    logprobs: logprobsFor(n, 7),
    finishReason: 'stop',
    reasoning: null,
    content: 'x'.repeat(n),
    toolCalls: [],
    splits: 0,
  };
}

function readAll(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
