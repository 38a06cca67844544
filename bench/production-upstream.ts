/**
 * The production bench's inference server (bench/production.ts), in its own process: replies shaped
 * as vLLM's `/v1/chat/completions` with `return_token_ids` and `logprobs` on, started with
 * `--return-tokens-as-token-ids` (vLLM serving_chat.py `_create_chat_logprobs`: `token` is
 * `token_id:N`, `bytes` the UTF-8 of that string, `top_logprobs: []` for `top_logprobs: 0`):
 * - non-streaming: top-level `prompt_token_ids` (a ~20k-token prompt), `choices[0].token_ids` and
 *   `choices[0].logprobs.content[]`, one entry per sampled token;
 * - streaming: the role chunk carries `prompt_token_ids`, then one chunk per sampled token with its
 *   `token_ids` and `logprobs` (vLLM's default stream interval), the finish chunk, usage when
 *   `stream_options.include_usage`, `data: [DONE]`.
 *
 * It does no tokenizer or template work per call, so the comparison is the proxies': the ids are
 * real Qwen3 ids (the Claude Code fixture's text tokenized once at start), every reply is the same
 * (built once), and every path gets it whatever the request asked, so each proxy carries the same
 * bytes. Streamed chunks go out one event loop turn apart, so each arrives as its own read, as
 * tokens do from a real server; `--chunk-ms N` spaces them by N ms instead.
 *
 *   tsx bench/production-upstream.ts [--prompt-tokens 20000] [--sampled-tokens 300] [--chunk-ms 0]
 *
 * Prints `{"url", "replyBytes", "streamBytes", "promptTokens", "sampledTokens"}` as one JSON line.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { loadQwen3 } from '../src/mock-server/qwen3.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const arg = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const PROMPT_TOKENS = arg('--prompt-tokens', 20_000);
const SAMPLED_TOKENS = arg('--sampled-tokens', 300);
const CHUNK_MS = arg('--chunk-ms', 0);
const MODEL = 'Qwen/Qwen3-8B';
const CREATED = 1_760_000_000;

/** `n` ids of `text` tokenized, the text repeated as often as needed. */
function idsOf(encode: (t: string) => number[], text: string, n: number): number[] {
  const once = encode(text);
  const out: number[] = [];
  while (out.length < n) out.push(...once.slice(0, n - out.length));
  return out;
}

const qwen = loadQwen3();
const fixture = fs.readFileSync(path.join(ROOT, 'fixtures/requests/claude-code/01-first-call.json'), 'utf8');
const promptIds = idsOf((t) => qwen.encode(t), fixture, PROMPT_TOKENS);
const answer =
  'I listed the files and made the change. The handler now validates its input before the call, returns early on an empty list, and the tests cover both paths. ';
const sampledIds = idsOf((t) => qwen.encode(t), answer, SAMPLED_TOKENS - 1);
sampledIds.push(qwen.eosId);
// Logprobs as vLLM prints them (Python float repr: full precision, sometimes an exponent).
let seed = 12345;
const random = () => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed / 2 ** 31;
};
const logprobs = sampledIds.map(() => Math.log(1 - random() * 0.999));
const tokenTexts = sampledIds.map((id, i) => (i === sampledIds.length - 1 ? '' : qwen.decode([id])));
const content = tokenTexts.join('');
const entry = (i: number) => {
  const token = `token_id:${sampledIds[i]}`;
  return { token, logprob: logprobs[i]!, bytes: [...Buffer.from(token, 'utf8')], top_logprobs: [] };
};
const usage = { prompt_tokens: promptIds.length, total_tokens: promptIds.length + sampledIds.length, completion_tokens: sampledIds.length };

// The reply, serialized once; each call splices in its own id (ID is 8 hex digits wide).
const ID = 'chatcmpl-00000000';
const completion = JSON.stringify({
  id: ID,
  object: 'chat.completion',
  created: CREATED,
  model: MODEL,
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content, reasoning: null, tool_calls: [] },
      logprobs: { content: sampledIds.map((_, i) => entry(i)) },
      finish_reason: 'stop',
      stop_reason: null,
      token_ids: sampledIds,
    },
  ],
  service_tier: null,
  system_fingerprint: null,
  usage: { ...usage, prompt_tokens_details: null },
  prompt_logprobs: null,
  prompt_token_ids: promptIds,
  kv_transfer_params: null,
});
const chunk = (rest: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: ID, object: 'chat.completion.chunk', created: CREATED, model: MODEL, ...rest })}\n\n`;
const streamHead = chunk({
  choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
  prompt_token_ids: promptIds,
});
const streamBody = sampledIds.map((id, i) => {
  const last = i === sampledIds.length - 1;
  return chunk({
    choices: [
      {
        index: 0,
        delta: last ? {} : { content: tokenTexts[i] },
        logprobs: { content: [entry(i)] },
        finish_reason: last ? 'stop' : null,
        ...(last ? { stop_reason: null } : {}),
        token_ids: [id],
      },
    ],
  });
});
const streamUsage = chunk({ choices: [], usage });

let served = 0;
const withId = (text: string, id: string) => text.replaceAll(ID, id);

async function stream(res: http.ServerResponse, id: string, includeUsage: boolean): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  res.write(withId(streamHead, id));
  for (const event of streamBody) {
    // One event per turn of the loop (or per N ms): each reaches the proxy as its own read.
    await new Promise((r) => (CHUNK_MS > 0 ? setTimeout(r, CHUNK_MS) : setImmediate(r)));
    if (res.destroyed) return;
    res.write(withId(event, id));
  }
  if (includeUsage) res.write(withId(streamUsage, id));
  res.end('data: [DONE]\n\n');
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.method !== 'POST' || !req.url?.startsWith('/v1/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"Not Found","type":"NotFoundError","param":null,"code":404}}');
      return;
    }
    // vLLM parses every request (pydantic); the paths' bodies are all about the same size.
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { stream?: boolean; stream_options?: { include_usage?: boolean } };
    const id = `chatcmpl-${(served++ % 2 ** 32).toString(16).padStart(8, '0')}`;
    if (body.stream === true) {
      void stream(res, id, body.stream_options?.include_usage === true);
      return;
    }
    const text = withId(completion, id);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  });
});
// The bench's event loop can be busy for a while: an idle kept-alive socket stays open until the client closes it.
server.keepAliveTimeout = 0;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  const streamBytes = Buffer.byteLength(streamHead) + streamBody.reduce((n, e) => n + Buffer.byteLength(e), 0) + Buffer.byteLength(streamUsage) + 14;
  process.stdout.write(
    `${JSON.stringify({ url: `http://127.0.0.1:${port}`, replyBytes: Buffer.byteLength(completion), streamBytes, promptTokens: promptIds.length, sampledTokens: sampledIds.length })}\n`,
  );
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
