import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadQwen3, type Qwen3 } from './qwen3.js';
import { logprobsFor, sampleReply, type SampledReply, type ScriptedReply } from './sampler.js';
import { demoScript } from './script.js';

/**
 * `polar mock-server`: a scripted stand-in for a vLLM server, for trying polar and testing harness
 * integrations without a GPU. It is not a model: replies follow a script (see script.ts). Everything
 * else is real: it speaks vLLM's OpenAI endpoints and token fields (`/v1/chat/completions` with
 * `return_token_ids` → top-level `prompt_token_ids` and `choices[].token_ids`, `logprobs` +
 * `top_logprobs` → `logprobs.content[]`; `/v1/models` with `max_model_len`; `/tokenize`), renders
 * prompts with the real Qwen3 chat template and tokenizer, and samples ids that include
 * non-canonical token splits, so a recording made by re-tokenizing text would not match. It logs
 * every call it served, and misbehaves on command (for polar's own fault tests).
 */

export type FaultMode = 'http-500' | 'http-400-context' | 'bad-json' | 'stall' | 'drop' | 'error-event';

export interface MockServerOptions {
  model?: string;
  /** Decides each reply; defaults to the demo task (script.ts). */
  script?: (body: ChatBody, callIndex: number) => ScriptedReply;
  host?: string;
  port?: number;
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
}

export interface ChatBody {
  model?: string;
  messages: { role: string; content?: unknown; [k: string]: unknown }[];
  tools?: unknown[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  logprobs?: boolean;
  top_logprobs?: number;
  return_token_ids?: boolean;
  max_tokens?: number;
  max_completion_tokens?: number;
  chat_template_kwargs?: { enable_thinking?: boolean };
  [k: string]: unknown;
}

export interface LoggedCall {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: ChatBody;
  promptIds: number[];
  reply: SampledReply;
}

export interface MockServer {
  url: string;
  model: string;
  calls: LoggedCall[];
  /** Requests seen, including ones that failed on purpose. */
  requestCount(): number;
  /** `/tokenize` calls seen. */
  tokenizeCount(): number;
  /** The next `count` chat requests misbehave this way. */
  fault(mode: FaultMode, count?: number): void;
  /** Resolves when the server has seen the client go away for a stalled or slow request. */
  clientGone(): Promise<void>;
  close(): Promise<void>;
}

export const MAX_MODEL_LEN = 40_960;

export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((p) => (p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : ''))
      .join('\n');
  }
  return '';
}

export async function startMockServer(options: MockServerOptions = {}): Promise<MockServer> {
  const model = options.model ?? 'Qwen/Qwen3-8B';
  const qwen = options.fast ? undefined : loadQwen3();
  const calls: LoggedCall[] = [];
  const faults: FaultMode[] = [];
  let seen = 0;
  let replies = 0;
  let tokenizeCalls = 0;
  let goneWaiters: (() => void)[] = [];
  const sockets = new Set<import('node:net').Socket>();

  const server = http.createServer((req, res) => {
    void handle(req, res).catch((err) => {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: String(err), type: 'InternalServerError', param: null, code: 500 } }));
      } else res.destroy();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readAll(req);
    if (req.method === 'GET' && req.url === '/v1/models') {
      json(res, 200, { object: 'list', data: [{ id: model, object: 'model', created: 0, owned_by: 'vllm', max_model_len: MAX_MODEL_LEN }] });
      return;
    }
    if (req.method === 'POST' && req.url === '/tokenize') {
      // vLLM's /tokenize with `messages`: the prompt the chat endpoint would render, counted.
      tokenizeCalls++;
      const chat = JSON.parse(body) as ChatBody;
      const ids = qwen ? renderPrompt(qwen, chat) : syntheticPrompt(body.length);
      json(res, 200, { count: ids.length, max_model_len: MAX_MODEL_LEN, tokens: ids });
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      json(res, 404, { error: { message: 'Not Found', type: 'NotFoundError', param: null, code: 404 } });
      return;
    }
    seen++;
    const fault = faults.shift();
    const chat = JSON.parse(body) as ChatBody;
    res.on('close', () => {
      if (!res.writableFinished) {
        const waiters = goneWaiters;
        goneWaiters = [];
        for (const w of waiters) w();
      }
    });
    if (fault === 'http-500') {
      json(res, 500, { error: { message: 'EngineCore encountered an issue', type: 'InternalServerError', param: null, code: 500 } });
      return;
    }
    if (fault === 'http-400-context') {
      json(res, 400, {
        error: { message: "This model's maximum context length is 40960 tokens. However, you requested 50000 tokens.", type: 'BadRequestError', param: null, code: 400 },
      });
      return;
    }
    if (fault === 'drop' && !chat.stream) {
      req.socket.destroy();
      return;
    }
    if (fault === 'stall' && !chat.stream) return; // never answers
    if (fault === 'bad-json' && !chat.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"id": "chatcmpl-broken", "choices": [');
      return;
    }

    // vLLM answers a stream's headers at once and its first chunk after prefill; a plain call waits.
    if (options.latencyMs && !chat.stream) await sleep(options.latencyMs);
    const served = replies++;
    const promptIds = qwen ? renderPrompt(qwen, chat) : syntheticPrompt(body.length);
    const maxTokens = chat.max_completion_tokens ?? chat.max_tokens;
    const reply = qwen
      ? sampleReply(qwen, (options.script ?? demoScript)(chat, served), {
          ...(maxTokens !== undefined ? { maxTokens } : {}),
          splitEvery: options.splitEvery ?? 3,
          seed: served + 1,
          // Unique per reply whether or not calls are logged: harnesses drop a tool call whose id
          // they have already seen.
          callId: `${served}x`,
        })
      : syntheticReply(maxTokens);
    if (options.log !== false) calls.push({ path: req.url, headers: req.headers, body: chat, promptIds, reply });
    const id = `chatcmpl-${served.toString(16).padStart(8, '0')}`;
    if (chat.stream) await stream(res, chat, id, promptIds, reply, fault);
    else json(res, 200, completion(chat, id, promptIds, reply));
  }

  function renderPrompt(q: Qwen3, chat: ChatBody): number[] {
    // vLLM flattens text parts into one string for string-content templates such as Qwen3's.
    const messages = chat.messages.map((m) => ({ ...m, content: typeof m.content === 'string' || m.content == null ? m.content ?? '' : textOf(m.content) }));
    const text = q.render(messages, {
      ...(chat.tools ? { tools: chat.tools } : {}),
      enableThinking: chat.chat_template_kwargs?.enable_thinking !== false,
    });
    return q.encode(text);
  }

  function logprobEntries(ids: number[], lps: number[]) {
    return ids.map((tid, i) => {
      const token = qwen ? qwen.decode([tid]) : `t${tid}`;
      return { token, logprob: lps[i]!, bytes: [...Buffer.from(token, 'utf8')], top_logprobs: [] };
    });
  }

  function completion(chat: ChatBody, id: string, promptIds: number[], reply: SampledReply) {
    const message: Record<string, unknown> = { role: 'assistant', content: reply.content ?? (reply.toolCalls.length > 0 ? null : '') };
    if (reply.reasoning !== null) message[options.reasoningField ?? 'reasoning'] = reply.reasoning;
    if (reply.toolCalls.length > 0) {
      message.tool_calls = reply.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
    }
    const choice: Record<string, unknown> = {
      index: 0,
      message,
      logprobs: chat.logprobs ? { content: logprobEntries(reply.ids, reply.logprobs) } : null,
      finish_reason: reply.finishReason,
      stop_reason: null,
    };
    if (chat.return_token_ids) choice.token_ids = reply.ids;
    return {
      id,
      object: 'chat.completion',
      created: 1_760_000_000,
      model,
      choices: [choice],
      service_tier: null,
      system_fingerprint: null,
      usage: { prompt_tokens: promptIds.length, total_tokens: promptIds.length + reply.ids.length, completion_tokens: reply.ids.length, prompt_tokens_details: null },
      prompt_logprobs: null,
      prompt_token_ids: chat.return_token_ids ? promptIds : null,
      kv_transfer_params: null,
    };
  }

  async function stream(res: ServerResponse, chat: ChatBody, id: string, promptIds: number[], reply: SampledReply, fault: FaultMode | undefined) {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    res.flushHeaders();
    if (options.latencyMs) await sleep(options.latencyMs);
    const base = { id, object: 'chat.completion.chunk', created: 1_760_000_000, model };
    const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    send({
      ...base,
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
      prompt_token_ids: chat.return_token_ids ? promptIds : null,
    });
    if (fault === 'stall') return;
    if (fault === 'error-event') {
      send({ error: { message: 'generation failed: CUDA error', type: 'InternalServerError', param: null, code: 500 } });
      res.end('data: [DONE]\n\n');
      return;
    }
    if (fault === 'bad-json') {
      res.end('data: {"id": "chatcmpl-broken", "choices": [\n\n');
      return;
    }
    const chunkTokens = Math.max(1, options.chunkTokens ?? 2);
    const pieces = qwen ? streamPieces(qwen, reply, chunkTokens) : [{ ids: reply.ids, delta: { content: 'x'.repeat(reply.ids.length) } }];
    let offset = 0;
    let sentChunks = 0;
    for (let p = 0; p < pieces.length; p++) {
      const piece = pieces[p]!;
      if (fault === 'drop' && sentChunks >= 3) {
        res.socket?.destroy();
        return;
      }
      if (options.chunkDelayMs) await sleep(options.chunkDelayMs);
      if (res.destroyed) return;
      const last = p === pieces.length - 1;
      const lps = reply.logprobs.slice(offset, offset + piece.ids.length);
      const choice: Record<string, unknown> = {
        index: 0,
        delta: piece.delta,
        logprobs: chat.logprobs ? { content: logprobEntries(piece.ids, lps) } : null,
        finish_reason: last ? reply.finishReason : null,
      };
      if (last) choice.stop_reason = null;
      if (chat.return_token_ids) choice.token_ids = piece.ids;
      send({ ...base, choices: [choice] });
      offset += piece.ids.length;
      sentChunks++;
    }
    if (chat.stream_options?.include_usage) {
      send({ ...base, choices: [], usage: { prompt_tokens: promptIds.length, total_tokens: promptIds.length + reply.ids.length, completion_tokens: reply.ids.length } });
    }
    res.end('data: [DONE]\n\n');
  }

  /** Cuts a reply into streamed chunks the way vLLM's incremental detokenizer and parsers would. */
  function streamPieces(q: Qwen3, reply: SampledReply, chunkTokens: number) {
    const pieces: { ids: number[]; delta: Record<string, unknown> }[] = [];
    const field = options.reasoningField ?? 'reasoning';
    for (const seg of reply.segments) {
      let emitted = '';
      for (let i = 0; i < seg.ids.length; i += chunkTokens) {
        const ids = seg.ids.slice(i, i + chunkTokens);
        const end = i + chunkTokens >= seg.ids.length;
        let delta: Record<string, unknown> = {};
        if (seg.kind === 'content' || seg.kind === 'reasoning') {
          let text = q.decode(seg.ids.slice(0, i + ids.length));
          // Hold back a split UTF-8 sequence until its last byte arrives, as vLLM's detokenizer does.
          if (!end) while (text.endsWith('\uFFFD')) text = text.slice(0, -1);
          const piece = text.slice(emitted.length);
          emitted = text;
          if (piece) delta = seg.kind === 'content' ? { content: piece } : { [field]: piece };
        } else if (seg.kind === 'tool' && end) {
          const call = reply.toolCalls[seg.toolIndex ?? 0]!;
          delta = { tool_calls: [{ index: seg.toolIndex ?? 0, id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }] };
        }
        pieces.push({ ids, delta });
      }
    }
    return pieces;
  }

  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    model,
    calls,
    requestCount: () => seen,
    tokenizeCount: () => tokenizeCalls,
    fault(mode, count = 1) {
      for (let i = 0; i < count; i++) faults.push(mode);
    },
    clientGone: () => new Promise<void>((resolve) => goneWaiters.push(resolve)),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
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
  return { segments: [{ kind: 'content', ids }], ids, logprobs: logprobsFor(n, 7), finishReason: 'stop', reasoning: null, content: 'x'.repeat(n), toolCalls: [], splits: 0 };
}

function json(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readAll(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
