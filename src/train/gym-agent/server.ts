import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseJsonBody, readBody } from '../../core/http/body.js';
import { pathOf, Router } from '../../core/http/router.js';
import { sendJson } from '../../core/http/send.js';
import { type HttpGuard, listenGuarded } from '../../core/http/guard.js';
import { AGENT_NAME } from './wiring.js';
import { aggregateMetrics } from './rows.js';

type GymHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

export interface GymServerOptions {
  host: string;
  port: number;
  /** The browser checks and the token (http-guard.ts), run before any route. */
  guard: HttpGuard;
  rolloutId: string;
  /** `POST /run` (run-handler.ts). */
  run: GymHandler;
  onNotice?: (line: string) => void;
}

/**
 * NeMo Gym's agent-server routes: `GET /` (Gym's readiness probe), `POST /run` (one row),
 * `POST /aggregate_metrics`. Every request passes the guard first; only the readiness probe is let
 * through without the token (Gym sends none), and it still must come from this machine's names.
 */
export async function startGymServer(options: GymServerOptions): Promise<{ server: http.Server; address: AddressInfo }> {
  const { guard } = options;
  const router = new Router<GymHandler>()
    .on('GET', '/', (req, res) => {
      req.resume();
      sendJson(res, 200, { status: 'ok', agent: AGENT_NAME, ...(guard.token ? {} : { rollout_id: options.rolloutId }) });
    })
    .on('POST', '/run', options.run)
    .on('POST', '/aggregate_metrics', async (req, res) => {
      sendJson(res, 200, aggregateMetrics(parseJsonBody(await readBody(req, 64 * 1024 * 1024))));
    });
  const server = http.createServer({ keepAliveTimeout: 75_000 }, (req, res) => {
    void handle(options, router, req, res).catch((err: unknown) => {
      // Never a non-200 for /run (it would stop training): bad rows are answered masked by its handler.
      if (!res.headersSent) sendJson(res, 500, { error: { message: (err as Error).message } });
    });
  });
  const address = await listenGuarded(server, guard, options.host, options.port);
  return { server, address };
}

async function handle(options: GymServerOptions, router: Router<GymHandler>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = pathOf(req.url);
  const isPost = req.method === 'POST';
  const refusal = options.guard.check(req, { token: !(req.method === 'GET' && url === '/'), json: isPost });
  if (refusal) {
    req.resume();
    options.onNotice?.(`polar gym-agent: refused ${req.method} ${url}: ${refusal.message}`);
    sendJson(res, refusal.status, { error: { message: refusal.message, code: refusal.code } });
    return;
  }
  const route = router.match(req.method ?? 'GET', url);
  if (route.found) return route.handler(req, res);
  req.resume();
  if (url === '/v1/responses' || url.endsWith('/v1/responses')) {
    sendJson(res, 501, { error: { message: 'polar gym-agent serves /run; its harness talks to the policy through polar, not through /v1/responses' } });
    return;
  }
  sendJson(res, 404, { error: { message: `no route ${req.method} ${url}; polar gym-agent serves GET /, POST /run, POST /aggregate_metrics` } });
}
