import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { isRecord, type ChatMessage } from '../core/chat.js';
import { PolarError } from '../core/errors.js';
import { parseJsonBody, readBody } from '../core/http/body.js';
import { HttpGuard, listenGuarded } from '../proxy/http-guard.js';
import type { RequestRecord } from '../store/requests.js';
import type { Store } from '../store/store.js';
import { callConversation, isConversation } from '../trajectory/conversation.js';
import { compareConversations, type Mismatch } from './match.js';

/**
 * A cassette upstream: an inference server (vLLM's chat endpoint, token fields included) that
 * answers a harness's calls from a recorded session instead of a model. A call is answered by the
 * first recorded call, in order, that it matches (match.ts: the same conversation, up to what a
 * replay is bound to change), whichever agent made it, so sub-agents interleaved differently still
 * replay. A call that matches none diverges: the first such is reported (which call it should have
 * been, which message differs, both sides) and answered with a 400 whose message says so, which the
 * proxy hands the harness in its own format. Point `polar run --upstream <cassette>` at it.
 */
export interface Divergence extends Mismatch {
  /** The recorded call the replay was expected to make next (its sequence number and id). */
  expectedSeq: number;
  expectedCallId: string;
  /** The replayed request's position among the calls the cassette has seen. */
  replayedCall: number;
}

interface Tape {
  row: RequestRecord;
  messages: ChatMessage[];
}

export interface Cassette {
  url: string;
  model: string;
  /** Recorded calls answered so far, and in all. */
  matched(): number;
  total(): number;
  /** The first divergence, if any. */
  divergence(): Divergence | null;
  /** Recorded calls the replay never made. */
  unplayed(): { seq: number; id: string }[];
  close(): Promise<void>;
}

/**
 * It serves recorded conversations, token ids and logprobs: only to callers on this machine that
 * reach it by its own address (http-guard.ts), never to a web page, even one whose name was rebound
 * to 127.0.0.1.
 */
export async function startCassette(
  store: Store,
  sessionId: string,
  options: { host?: string; port?: number; authToken?: string | null; allowHosts?: readonly string[] } = {},
): Promise<Cassette> {
  const host = options.host ?? '127.0.0.1';
  const guard = new HttpGuard({ host, token: options.authToken ?? null, allowHosts: options.allowHosts ?? [], what: 'polar replay' });
  const session = store.sessions.get(sessionId);
  if (!session) throw new PolarError('POLAR_USAGE', `no session ${JSON.stringify(sessionId)} in this database; list them with \`polar sessions\``);
  const tapes: Tape[] = [];
  for (const summary of store.requests.list(sessionId)) {
    if (summary.status !== 'ok') continue;
    const row = store.requests.get(summary.id)!;
    const conversation = callConversation(row);
    if (!isRecord(row.assistantMessage) || !isConversation(conversation)) continue;
    tapes.push({ row, messages: conversation.messages });
  }
  if (tapes.length === 0)
    throw new PolarError('POLAR_USAGE', `session ${sessionId} has no call recorded with its reply (recorded before polar kept them, or only failed calls)`);
  const model = session.servedModel ?? tapes[0]!.row.servedModel ?? 'polar-replay';
  const used = new Set<number>();
  let seen = 0;
  let first: Divergence | null = null;

  const server = http.createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => send(res, 500, { object: 'error', message: (err as Error).message, type: 'InternalServerError', code: 500 }));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refusal = guard.check(req);
    if (refusal) {
      req.resume();
      send(res, refusal.status, {
        object: 'error',
        message: refusal.message,
        type: refusal.status === 401 ? 'AuthenticationError' : 'PermissionDeniedError',
        code: refusal.status,
      });
      return;
    }
    const url = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && url === '/v1/models') {
      req.resume();
      send(res, 200, { object: 'list', data: [{ id: model, object: 'model', created: 0, owned_by: 'polar-replay' }] });
      return;
    }
    if (req.method !== 'POST' || url !== '/v1/chat/completions') {
      req.resume();
      send(res, 404, {
        object: 'error',
        message: `polar replay serves POST /v1/chat/completions (a cassette of session ${sessionId}); not ${req.method} ${url}`,
        type: 'NotFoundError',
        code: 404,
      });
      return;
    }
    const body = parseJsonBody(await readBody(req, 256 * 1024 * 1024));
    const replayed = isRecord(body) && Array.isArray(body.messages) ? (body.messages as ChatMessage[]) : [];
    const call = ++seen;
    let best: { index: number; mismatch: Mismatch } | null = null;
    for (let i = 0; i < tapes.length; i++) {
      if (used.has(i)) continue;
      const mismatch = compareConversations(tapes[i]!.messages, replayed);
      if (!mismatch) {
        used.add(i);
        answer(
          res,
          tapes[i]!.row,
          isRecord(body) && body.stream === true,
          isRecord(body) && isRecord(body.stream_options) && body.stream_options.include_usage === true,
        );
        return;
      }
      // The candidate it resembles most: the one it agrees with for longest.
      if (!best || mismatch.message > best.mismatch.message) best = { index: i, mismatch };
    }
    const expected = best ? tapes[best.index]!.row : tapes[0]!.row;
    const divergence: Divergence = {
      ...(best?.mismatch ?? { message: 0, what: 'an extra call', expected: 'no more calls', found: `${replayed.length} messages` }),
      expectedSeq: expected.seq,
      expectedCallId: expected.id,
      replayedCall: call,
    };
    first ??= divergence;
    send(res, 400, { object: 'error', message: describe(divergence), type: 'BadRequestError', param: 'messages', code: 400 });
  }

  const { port } = await listenGuarded(server, guard, host, options.port ?? 0);
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    model,
    matched: () => used.size,
    total: () => tapes.length,
    divergence: () => first,
    unplayed: () => tapes.filter((_, i) => !used.has(i)).map((t) => ({ seq: t.row.seq, id: t.row.id })),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function describe(d: Divergence): string {
  return `polar replay: the harness's call ${d.replayedCall} diverged from the recording at recorded call #${d.expectedSeq} (${d.expectedCallId}), message ${d.message} (${d.what}): expected ${JSON.stringify(d.expected)}, got ${JSON.stringify(d.found)}`;
}

/** The recorded reply as vLLM sends it: the message, finish reason, and the recorded token fields. */
function answer(res: ServerResponse, row: RequestRecord, stream: boolean, usage: boolean): void {
  const message = row.assistantMessage as ChatMessage;
  const calls = (message.tool_calls ?? []).map((c, index) => ({
    index,
    id: c.id,
    type: 'function' as const,
    function: { name: c.function.name, arguments: c.function.arguments },
  }));
  const finish = row.finishReason ?? (calls.length > 0 ? 'tool_calls' : 'stop');
  const tokens = row.promptIds && row.sampledIds ? { prompt: row.promptIds, sampled: row.sampledIds, logprobs: row.logprobs } : null;
  const logprobs = tokens?.logprobs
    ? { content: tokens.sampled.map((id, i) => ({ token: `token_id:${id}`, logprob: tokens.logprobs![i]!, bytes: null, top_logprobs: [] })) }
    : null;
  const usageBlock = {
    prompt_tokens: tokens?.prompt.length ?? 0,
    completion_tokens: tokens?.sampled.length ?? 0,
    total_tokens: (tokens?.prompt.length ?? 0) + (tokens?.sampled.length ?? 0),
  };
  const base = { id: `chatcmpl-replay-${row.seq}`, created: Math.floor(row.startedAt / 1000), model: row.servedModel ?? 'polar-replay' };
  const reasoning = typeof message.reasoning_content === 'string' && message.reasoning_content ? message.reasoning_content : null;
  const content = typeof message.content === 'string' ? message.content : '';
  if (!stream) {
    send(res, 200, {
      ...base,
      object: 'chat.completion',
      ...(tokens ? { prompt_token_ids: tokens.prompt } : {}),
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content,
            ...(reasoning ? { reasoning } : {}),
            ...(calls.length > 0 ? { tool_calls: calls.map(({ index: _i, ...c }) => c) } : {}),
          },
          finish_reason: finish,
          stop_reason: null,
          ...(tokens ? { token_ids: tokens.sampled } : {}),
          logprobs,
        },
      ],
      usage: usageBlock,
    });
    return;
  }
  const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}, top: Record<string, unknown> = {}) => ({
    ...base,
    object: 'chat.completion.chunk',
    ...top,
    choices: [{ index: 0, delta, finish_reason: null, ...extra }],
  });
  const events: unknown[] = [chunk({ role: 'assistant', content: '' }, {}, tokens ? { prompt_token_ids: tokens.prompt } : {})];
  if (reasoning) events.push(chunk({ reasoning }));
  if (content) events.push(chunk({ content }));
  for (const c of calls) events.push(chunk({ tool_calls: [c] }));
  events.push(chunk({}, { finish_reason: finish, stop_reason: null, ...(tokens ? { token_ids: tokens.sampled } : {}), logprobs }));
  if (usage) events.push({ ...base, object: 'chat.completion.chunk', choices: [], usage: usageBlock });
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  res.end(`${events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('')}data: [DONE]\n\n`);
}

function send(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
