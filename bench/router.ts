/**
 * The HTTP routing layer on the proxy's hot path, side by side (issue 27: Hono's node adapter, or a
 * shared internal router if that measures faster):
 *
 * - match: the cost of naming the handler for a mix of the proxy's request lines (session-prefixed
 *   and bare model calls of all four APIs, /v1/models, /health), ns per request, in this process:
 *   the proxy's own classifier (src/proxy/route.ts `matchRoute`), the shared router
 *   (src/core/http/router.ts) with the same routes, and Hono's router (the one `new Hono()` uses);
 * - served: the same routes behind a real server in a child process, a keep-alive client posting a
 *   1 KB body that the handler reads whole and answers with a small JSON: node:http + matchRoute,
 *   node:http + the shared router, and Hono's node adapter (`@hono/node-server`, handlers reading
 *   `c.req.arrayBuffer()` and answering `c.json`; and again reading and answering on the Node
 *   request and response it passes through, as the proxy's streaming would have to). Reported: the server's CPU per request (user +
 *   system, from the child's own process.cpuUsage) and the client's wall time per request, median
 *   over rounds that take turns.
 *
 * Hono is not a polar dependency: pass a folder where it is installed (`npm install hono
 * @hono/node-server` there) as `--hono DIR` (or $HONO_DIR); without it only polar's two are measured.
 *
 *   npx tsx bench/router.ts [--hono DIR] [--quick] [--write]
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { readBody } from '../src/core/http/body.js';
import { pathOf, Router } from '../src/core/http/router.js';
import { sendJsonText } from '../src/core/http/send.js';
import { matchRoute } from '../src/proxy/route.js';
import { writeResultsSection } from './paths.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const honoDir = args.includes('--hono') ? args[args.indexOf('--hono') + 1] : process.env.HONO_DIR;

/** The proxy's request lines, weighted as a session sees them: mostly model calls under /s/<session>/. */
const LINES: readonly [string, string][] = [
  ['POST', '/s/rollout-1-task-3-s0/v1/chat/completions'],
  ['POST', '/s/rollout-1-task-3-s0/v1/messages'],
  ['POST', '/s/rollout-1-task-3-s0/v1/responses'],
  ['POST', '/s/rollout-1-task-3-s0/v1beta/models/qwen3:streamGenerateContent'],
  ['POST', '/v1/chat/completions'],
  ['POST', '/v1/messages'],
  ['GET', '/s/rollout-1-task-3-s0/v1/models'],
  ['GET', '/health'],
];

/** The fixed paths of the proxy's API routes (each also under /s/:session). */
const API: readonly [string, string, string][] = [
  ['POST', '/v1/chat/completions', 'openai-chat'],
  ['POST', '/v1/messages', 'anthropic-messages'],
  ['POST', '/v1/messages/count_tokens', 'count-tokens'],
  ['POST', '/v1/responses', 'openai-responses'],
  ['POST', '/v1beta/models/:call', 'google'],
  ['GET', '/v1/models', 'models'],
];

type Name = (params: Record<string, string>) => string;

function internalRouter(): Router<Name> {
  const router = new Router<Name>().on('GET', '/health', () => 'health');
  for (const [method, p, name] of API) {
    router.on(method, p, () => name);
    router.on(method, `/s/:session${p}`, (params) => `${name}@${params.session}`);
  }
  return router;
}

interface HonoModules {
  Hono: new () => HonoApp;
  /** `hono x, @hono/node-server y`, for the results. */
  versions: string;
  /** Returned by a handler that answered on the Node response itself. */
  alreadySent: Response;
  serve: (options: { fetch: unknown; port: number; hostname: string }, listening: (info: AddressInfo) => void) => http.Server;
}
interface HonoContext {
  req: { param(name: string): string | undefined; arrayBuffer(): Promise<ArrayBuffer> };
  env: { incoming: IncomingMessage; outgoing: ServerResponse };
  json(value: unknown): Response;
}
interface HonoApp {
  on(method: string, path: string, handler: (c: HonoContext) => Response | Promise<Response>): HonoApp;
  fetch: unknown;
  router: { match(method: string, path: string): unknown };
}

async function loadHono(): Promise<HonoModules | null> {
  if (!honoDir) return null;
  const require = createRequire(path.join(path.resolve(honoDir), 'package.json'));
  const hono = (await import(pathToFileURL(require.resolve('hono')).href)) as { Hono: HonoModules['Hono'] };
  const node = (await import(pathToFileURL(require.resolve('@hono/node-server')).href)) as { serve: HonoModules['serve'] };
  const sent = (await import(pathToFileURL(require.resolve('@hono/node-server/utils/response')).href)) as { RESPONSE_ALREADY_SENT: Response };
  const version = (name: string) =>
    (JSON.parse(readFileSync(path.join(path.resolve(honoDir), 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  const versions = `hono ${version('hono')}, @hono/node-server ${version('@hono/node-server')}`;
  return { Hono: hono.Hono, serve: node.serve, alreadySent: sent.RESPONSE_ALREADY_SENT, versions };
}

function honoApp(h: HonoModules, handler: (name: string) => (c: HonoContext) => Response | Promise<Response>): HonoApp {
  const app = new h.Hono();
  app.on('GET', '/health', handler('health'));
  for (const [method, p, name] of API) {
    app.on(method, p, handler(name));
    app.on(method, `/s/:session${p}`, handler(name));
  }
  return app;
}

/** ns per match over LINES, best of a few passes (the JIT warmed by the first). */
function nsPerMatch(match: (method: string, url: string) => unknown): number {
  const n = quick ? 200_000 : 1_000_000;
  let best = Number.POSITIVE_INFINITY;
  let sink = 0;
  for (let pass = 0; pass < 5; pass++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
      const [method, url] = LINES[i % LINES.length]!;
      if (match(method, url)) sink++;
    }
    best = Math.min(best, Number(process.hrtime.bigint() - t) / n);
  }
  if (sink === 0) throw new Error('nothing matched');
  return best;
}

// ---- the server side (a child process per variant) ----

async function serveVariant(variant: string): Promise<void> {
  const reply = JSON.stringify({ ok: true });
  const listening = (port: number) => process.send?.({ port });
  if (variant === 'hono' || variant === 'hono-raw') {
    const h = (await loadHono())!;
    const app = honoApp(
      h,
      variant === 'hono'
        ? (name) => async (c) => {
            await c.req.arrayBuffer();
            return c.json({ ok: true, route: name });
          }
        : // Hono routing only: the body read and the reply written on Node's own objects, as the proxy needs.
          (name) => async (c) => {
            await readBody(c.env.incoming, 1 << 20);
            sendJsonText(c.env.outgoing, 200, reply.replace('}', `,"route":"${name}"}`));
            return h.alreadySent;
          },
    );
    h.serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => listening(info.port));
  } else {
    const router = internalRouter();
    const name =
      variant === 'matchRoute' ? (req: IncomingMessage) => matchRoute(req.method ?? 'GET', req.url ?? '/').kind : (req: IncomingMessage) => routed(router, req);
    const server = http.createServer({ keepAliveTimeout: 75_000 }, (req: IncomingMessage, res: ServerResponse) => {
      void readBody(req, 1 << 20).then(() => sendJsonText(res, 200, reply.replace('}', `,"route":"${name(req)}"}`)));
    });
    server.listen(0, '127.0.0.1', () => listening((server.address() as AddressInfo).port));
  }
  process.on('message', (m) => {
    if (m === 'cpu') {
      const u = process.cpuUsage();
      process.send?.({ cpuUs: u.user + u.system });
    }
  });
}

function routed(router: Router<Name>, req: IncomingMessage): string {
  const m = router.match(req.method ?? 'GET', pathOf(req.url));
  return m.found ? m.handler(m.params) : 'not-found';
}

// ---- the client side ----

interface Served {
  name: string;
  child: ChildProcess;
  pool: Pool;
}

async function startVariant(name: string): Promise<Served> {
  const child = fork(import.meta.filename, ['--serve', name, ...(honoDir ? ['--hono', honoDir] : [])], { execArgv: process.execArgv });
  const port = await new Promise<number>((resolve) => child.once('message', (m: { port: number }) => resolve(m.port)));
  return { name, child, pool: new Pool(`http://127.0.0.1:${port}`, { connections: 8 }) };
}

function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (m: { cpuUs: number }) => resolve(m.cpuUs));
    child.send('cpu');
  });
}

const BODY = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(1000) }] });

/** One round: `n` requests at concurrency 8; µs of server CPU and of client wall time per request. */
async function round(s: Served, n: number): Promise<{ cpu: number; wall: number }> {
  const before = await cpuOf(s.child);
  const t = process.hrtime.bigint();
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < n) {
        const [method, url] = LINES[next++ % LINES.length]!;
        const r = await s.pool.request({
          method: method as 'GET' | 'POST',
          path: url,
          ...(method === 'POST' ? { body: BODY, headers: { 'content-type': 'application/json' } } : {}),
        });
        await r.body.text();
      }
    }),
  );
  const wall = Number(process.hrtime.bigint() - t) / 1000 / n;
  return { cpu: ((await cpuOf(s.child)) - before) / n, wall };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const hono = await loadHono();
  const router = internalRouter();
  const match: [string, (method: string, url: string) => unknown][] = [
    ['proxy classifier (route.ts matchRoute)', (m, u) => matchRoute(m, u)],
    ['shared router (core/http/router.ts)', (m, u) => router.match(m, pathOf(u)).found],
  ];
  if (hono) {
    const app = honoApp(hono, () => (c) => c.json(null));
    match.push(['Hono router (new Hono())', (m, u) => app.router.match(m, pathOf(u))]);
  }
  const matchRows = match.map(([name, fn]) => [name, nsPerMatch(fn)] as const);

  const variants = ['matchRoute', 'router', ...(hono ? ['hono', 'hono-raw'] : [])];
  const served = await Promise.all(variants.map(startVariant));
  const n = quick ? 2_000 : 10_000;
  for (const s of served) await round(s, 2_000); // warm-up
  const results = new Map<string, { cpu: number[]; wall: number[] }>(variants.map((v) => [v, { cpu: [], wall: [] }]));
  for (let r = 0; r < (quick ? 3 : 7); r++) {
    // Take turns, each variant first in some round.
    for (let i = 0; i < served.length; i++) {
      const s = served[(i + r) % served.length]!;
      const one = await round(s, n);
      results.get(s.name)!.cpu.push(one.cpu);
      results.get(s.name)!.wall.push(one.wall);
    }
  }
  for (const s of served) {
    await s.pool.close();
    s.child.kill();
  }
  report(matchRows, variants, results, hono?.versions ?? 'Hono not measured (no --hono DIR)');
}

const LABEL: Record<string, string> = {
  matchRoute: 'node:http + proxy classifier',
  router: 'node:http + shared router',
  hono: 'Hono node adapter (@hono/node-server), Web Request/Response',
  'hono-raw': 'Hono node adapter, body and reply on the Node objects',
};

function report(
  matchRows: readonly (readonly [string, number])[],
  variants: string[],
  results: Map<string, { cpu: number[]; wall: number[] }>,
  versions: string,
): void {
  const cpu = (v: string) => median(results.get(v)!.cpu);
  const wall = (v: string) => median(results.get(v)!.wall);
  const base = cpu('router');
  const lines = [
    `## HTTP routing layer (${new Date().toISOString().slice(0, 10)}, ${os.cpus()[0]?.model ?? 'cpu'}, ${os.cpus().length} cores, Node ${process.version})`,
    '',
    `\`npx tsx bench/router.ts --hono DIR\` (bench/router.ts). Match: ns to name the handler, over the proxy's request lines (model calls of all four APIs with and without \`/s/<session>/\`, \`/v1/models\`, \`/health\`). Served: a child-process server reading a 1 KB body and answering a small JSON, 8 keep-alive connections; server CPU and client wall time per request, median of the rounds. ${versions}; 1-minute load ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores.`,
    '',
    '| match | ns/request |',
    '|---|---:|',
    ...matchRows.map(([name, ns]) => `| ${name} | ${ns.toFixed(0)} |`),
    '',
    '| served | server CPU µs/request | vs shared router | client wall µs/request |',
    '|---|---:|---:|---:|',
    ...variants.map(
      (v) =>
        `| ${LABEL[v]} | ${cpu(v).toFixed(1)} | ${v === 'router' ? '—' : `${cpu(v) - base >= 0 ? '+' : ''}${(cpu(v) - base).toFixed(1)}`} | ${wall(v).toFixed(1)} |`,
    ),
  ];
  const text = lines.join('\n');
  console.log(text);
  if (args.includes('--write')) writeResultsSection('HTTP routing layer', `${text}\n`);
}

if (args.includes('--serve')) void serveVariant(args[args.indexOf('--serve') + 1]!);
else await main();
