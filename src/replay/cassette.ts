import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { isRecord, type ChatMessage } from '../core/chat.js';
import { PolarError } from '../core/errors.js';
import { parseJsonBody, readBody } from '../core/http/body.js';
import { pathOf, Router } from '../core/http/router.js';
import { sendJson } from '../core/http/send.js';
import { HttpGuard, listenGuarded } from '../core/http/guard.js';
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
  const state: CassetteState = { sessionId, tapes, model, used: new Set(), seen: 0, first: null };
  const router = new Router<CassetteHandler>().on('GET', '/v1/models', models).on('POST', '/v1/chat/completions', replay);
  const server = http.createServer((req, res) => {
    void handle(state, guard, router, req, res).catch((err: unknown) =>
      sendJson(res, 500, { object: 'error', message: (err as Error).message, type: 'InternalServerError', code: 500 }),
    );
  });

  const { port } = await listenGuarded(server, guard, host, options.port ?? 0);
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    model,
    matched: () => state.used.size,
    total: () => tapes.length,
    divergence: () => state.first,
    unplayed: () => tapes.filter((_, i) => !state.used.has(i)).map((t) => ({ seq: t.row.seq, id: t.row.id })),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What the cassette's handlers share: its tapes and what the replay has matched so far. */
interface CassetteState {
  readonly sessionId: string;
  readonly tapes: readonly Tape[];
  readonly model: string;
  readonly used: Set<number>;
  seen: number;
  first: Divergence | null;
}

type CassetteHandler = (state: CassetteState, req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

async function handle(state: CassetteState, guard: HttpGuard, router: Router<CassetteHandler>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const refusal = guard.check(req);
  if (refusal) {
    req.resume();
    sendJson(res, refusal.status, {
      object: 'error',
      message: refusal.message,
      type: refusal.status === 401 ? 'AuthenticationError' : 'PermissionDeniedError',
      code: refusal.status,
    });
    return;
  }
  const url = pathOf(req.url);
  const route = router.match(req.method ?? 'GET', url);
  if (route.found) return route.handler(state, req, res);
  // A wrong method is a 404 too: the cassette is not an API with methods to list, it is one endpoint.
  req.resume();
  sendJson(res, 404, {
    object: 'error',
    message: `polar replay serves POST /v1/chat/completions (a cassette of session ${state.sessionId}); not ${req.method} ${url}`,
    type: 'NotFoundError',
    code: 404,
  });
}

function models(state: CassetteState, req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  sendJson(res, 200, { object: 'list', data: [{ id: state.model, object: 'model', created: 0, owned_by: 'polar-replay' }] });
}

/** A replayed call: answered by the first unused recorded call it matches, else the divergence, as a 400. */
async function replay(state: CassetteState, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { tapes, used } = state;
  const body = parseJsonBody(await readBody(req, 256 * 1024 * 1024));
  const replayed = isRecord(body) && Array.isArray(body.messages) ? (body.messages as ChatMessage[]) : [];
  const call = ++state.seen;
  let best: { index: number; mismatch: Mismatch } | null = null;
  for (let i = 0; i < tapes.length; i++) {
    if (used.has(i)) continue;
    const mismatch = compareConversations(tapes[i]!.messages, replayed);
    if (!mismatch) {
      used.add(i);
      const stream = isRecord(body) && body.stream === true;
      answer(res, tapes[i]!.row, stream, isRecord(body) && isRecord(body.stream_options) && body.stream_options.include_usage === true);
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
  state.first ??= divergence;
  sendJson(res, 400, { object: 'error', message: describe(divergence), type: 'BadRequestError', param: 'messages', code: 400 });
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
    sendJson(res, 200, {
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
