import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PolarError } from '../core/errors.js';
import { parseJsonBody, readBody } from '../core/http/body.js';
import type { HttpGuard } from '../core/http/guard.js';
import { listenGuarded } from '../core/http/guard.js';
import { pathOf, Router, type Params } from '../core/http/router.js';
import { sendJson } from '../core/http/send.js';
import type { Answer, RolloutService } from './service.js';

type Handler = (req: IncomingMessage, params: Params, query: URLSearchParams) => Promise<Answer> | Answer;

/** A TaskRequest's body cap: an instruction and its metadata, not a repository. */
const MAX_BODY = 16 * 1024 * 1024;

/**
 * Polar's rollout server routes (src/polar/rollout/server.py:133-184; contract.json endpoints), as the
 * trainer bridges call them (fixtures/polar-api/clients.md): submit, poll, cancel, `/health`,
 * `/rollout/status`. Errors are FastAPI's shape, `{"detail": …}`. Every request passes the guard
 * first: loopback only unless `--allow-from` names the trainer's addresses (the bridges send no
 * token; a browser's cross-site request is refused by its Origin).
 */
export async function startServeServer(options: {
  host: string;
  port: number;
  guard: HttpGuard;
  service: RolloutService;
  nodeId: string;
  /** The URL trainers reach this server at (known once it listens): /nodes names it as the gateway. */
  publicUrl: () => string;
  onNotice?: (line: string) => void;
}): Promise<{ server: http.Server; address: AddressInfo }> {
  const { service } = options;
  const router = new Router<Handler>()
    .on('GET', '/health', () => ({ status: 200, body: { status: 'ok', nodes: 1, tasks: service.counts() } }))
    .on('GET', '/rollout/status', async () => ({ status: 200, body: await service.overview() }))
    .on('POST', '/rollout/task/submit', async (req) => service.submit(parseJsonBody(await readBody(req, MAX_BODY))))
    .on('GET', '/rollout/task/:id', (_req, params) => service.get(params.id!))
    .on('DELETE', '/rollout/task/:id', (_req, params, query) => service.cancel(params.id!, queryBool(query.get('register_if_missing'))))
    // Polar's node list and its gateway's inference pause (server.py /nodes; gateway /admin/inference/*):
    // polar serve is its own one gateway, so Slime's weight-update hook finds it and pauses it.
    .on('GET', '/nodes', () => ({ status: 200, body: [{ node_id: options.nodeId, gateway_url: options.publicUrl(), healthy: true }] }))
    .on('POST', '/admin/inference/pause', async (_req, _params, query) => ({
      status: 200,
      body: await service.pauseInference(pauseSeconds(query.get('timeout_seconds')) * 1000),
    }))
    .on('POST', '/admin/inference/resume', async () => ({ status: 200, body: await service.resumeInference() }))
    .on('GET', '/admin/inference/status', async () => ({ status: 200, body: await service.inferenceStatus() }));
  const server = http.createServer({ keepAliveTimeout: 75_000 }, (req, res) => {
    void handle(options, router, req, res).catch((err: unknown) => {
      const status = err instanceof PolarError && err.status < 500 ? err.status : 500;
      if (!res.headersSent) sendJson(res, status, { detail: (err as Error).message });
    });
  });
  const address = await listenGuarded(server, options.guard, options.host, options.port);
  return { server, address };
}

async function handle(
  options: { guard: HttpGuard; onNotice?: (line: string) => void },
  router: Router<Handler>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://polar.invalid');
  // The pause and resume calls carry no body (Slime sends query parameters only).
  const refusal = options.guard.check(req, { json: req.method === 'POST' && url.pathname === '/rollout/task/submit' });
  if (refusal) {
    req.resume();
    options.onNotice?.(`polar serve: refused ${req.method} ${url.pathname}: ${refusal.message}`);
    sendJson(res, refusal.status, { detail: refusal.message });
    return;
  }
  const route = router.match(req.method ?? 'GET', pathOf(req.url));
  if (!route.found) {
    req.resume();
    const served =
      'GET /health, GET /rollout/status, POST /rollout/task/submit, GET and DELETE /rollout/task/{task_id}, GET /nodes, POST /admin/inference/pause and /resume';
    if (route.allowed.length > 0) sendJson(res, 405, { detail: 'Method Not Allowed' }, { allow: route.allowed.join(', ') });
    else sendJson(res, 404, { detail: `Not Found: polar serve answers ${served}` });
    return;
  }
  const answer = await route.handler(req, route.params, url.searchParams);
  if (req.method !== 'POST') req.resume();
  sendJson(res, answer.status, answer.body);
}

/** `timeout_seconds` of a pause (Slime sends 300); absent or not a number: 300. */
function pauseSeconds(v: string | null): number {
  const n = v === null ? Number.NaN : Number(v);
  return Number.isFinite(n) && n >= 0 ? Math.min(n, 3600) : 300;
}

/** FastAPI's bool query parsing: true/1/yes/on (and their false forms). */
function queryBool(v: string | null): boolean {
  return v !== null && ['1', 'true', 'yes', 'on', 't', 'y'].includes(v.toLowerCase());
}
