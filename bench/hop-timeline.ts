/**
 * Where a c=1 call's time goes, between processes and inside each: the benchmark's four ~100 KB
 * harness bodies (non-streaming) sent direct, through the bare relay and through polar, taking turns
 * in a different order each round (bench/paths.ts turnOrder), against the tokenizing upstream. Every process on the path (upstream, relay,
 * polar) is started with bench/socket-times.mjs, which records when each socket read and write and
 * each request's arrival and body end happened; this process records when it sent and when the last
 * byte came back. Lined up call by call, the call splits into segments that tile it:
 *
 *   caller → proxy | body read | request work | → upstream | upstream reads | [upstream's work] |
 *   upstream → proxy | reply work | → caller
 *
 * "→" segments are delivery: from one process's write to the next one's seeing the bytes (kernel
 * copy, and waking a process that was idle). The upstream's work (template, tokenizer, reply) is
 * the same for every path and left out of the sums. Medians per segment; "paired Δ" is the median
 * over rounds of the path's time (upstream's work left out) minus direct's in the same round.
 *
 *   npx tsx bench/hop-timeline.ts [--calls 100] [--write]   (--write: into bench/RESULTS.md)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { apiName, buildBodies, ROOT, spawnJsonLine, startPolar, stop, turnOrder, writeResultsSection } from './paths.js';

const callsAt = process.argv.indexOf('--calls');
const CALLS = callsAt > 0 ? Number(process.argv[callsAt + 1]) : 100;
const WARMUP = 10;
const HOOK = path.join(ROOT, 'bench/socket-times.mjs');
const PATHS = ['direct', 'relay', 'polar'] as const;
type PathName = (typeof PATHS)[number];

/** One socket event as socket-times.mjs writes it: [epoch ms, kind, socket, bytes]. */
type SocketEvent = [number, string, number, number];

interface Call {
  api: string;
  path: PathName;
  round: number;
  sent: number;
  done: number;
}

const epoch = () => performance.timeOrigin + performance.now();

async function send(pool: Pool, p: string, body: string): Promise<{ sent: number; done: number }> {
  const sent = epoch();
  const res = await pool.request({ method: 'POST', path: p, body, headers: { 'content-type': 'application/json', 'x-api-key': 'bench' } });
  // Read as npm run bench reads it: chunks, not decoded (direct's and the relay's replies carry
  // ~25k prompt ids that polar's does not, and decoding them would be charged to those paths).
  const chunks: Buffer[] = [];
  for await (const chunk of res.body) if (res.statusCode !== 200) chunks.push(chunk as Buffer);
  const done = epoch();
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode} from ${p}: ${Buffer.concat(chunks).toString('utf8').slice(0, 300)}`);
  return { sent, done };
}

/** The segments of one call, in ms (undefined where the path has no such segment). */
interface Segments {
  toProxy?: number;
  bodyRead?: number;
  requestWork?: number;
  toUpstream: number;
  upstreamReads: number;
  upstreamWork: number;
  fromUpstream?: number;
  replyWork?: number;
  toCaller: number;
}

const SEGMENTS: [keyof Segments, string][] = [
  ['toProxy', 'caller → proxy'],
  ['bodyRead', 'body read'],
  ['requestWork', 'request work'],
  ['toUpstream', '→ upstream'],
  ['upstreamReads', 'upstream reads body'],
  ['fromUpstream', 'upstream → proxy'],
  ['replyWork', 'reply work'],
  ['toCaller', '→ caller'],
];

/** The events in [from, to]; a call at c=1 owns every event of its window. */
function within(events: SocketEvent[], from: number, to: number): SocketEvent[] {
  return events.filter((e) => e[0] >= from && e[0] <= to);
}

function first(events: SocketEvent[], kind: string, after = -Infinity): number {
  const e = events.find((x) => x[1] === kind && x[0] >= after);
  if (!e) throw new Error(`no ${kind} event in the call's window`);
  return e[0];
}

function last(events: SocketEvent[], kind: string): number {
  for (let i = events.length - 1; i >= 0; i--) if (events[i]![1] === kind) return events[i]![0];
  throw new Error(`no ${kind} event in the call's window`);
}

/** Splits a call using the upstream's events and, for a proxied call, the proxy's. */
function segment(call: { sent: number; done: number }, upstream: SocketEvent[], proxy: SocketEvent[] | null): Segments {
  const up = within(upstream, call.sent, call.done);
  const arrived = first(up, 'request');
  const read = first(up, 'bodyEnd', arrived);
  const replied = first(up, 'Swrite', read);
  const common = { upstreamReads: read - arrived, upstreamWork: replied - read };
  if (!proxy) return { ...common, toUpstream: arrived - call.sent, toCaller: call.done - replied };
  const p = within(proxy, call.sent, call.done);
  const request = first(p, 'request');
  const bodyEnd = first(p, 'bodyEnd', request);
  const forwarded = first(p, 'Cwrite', bodyEnd);
  const replyIn = first(p, 'Cread', replied);
  const replyOut = last(p, 'Swrite');
  return {
    ...common,
    toProxy: request - call.sent,
    bodyRead: bodyEnd - request,
    requestWork: forwarded - bodyEnd,
    toUpstream: arrived - forwarded,
    fromUpstream: replyIn - replied,
    replyWork: replyOut - replyIn,
    toCaller: call.done - replyOut,
  };
}

/** A call's time with the upstream's own work left out: the sum of the segments. */
function pathTime(s: Segments): number {
  return SEGMENTS.reduce((sum, [k]) => sum + (s[k] ?? 0), 0);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-hops-'));
  const scripted = await spawnJsonLine(['--import', 'tsx', path.join(ROOT, 'bench/bridging-upstream.ts')]);
  const hooked = (name: string) => ({ args: ['--import', HOOK], env: { SOCKET_TIMES: path.join(dir, `${name}.json`) } });
  const children = [scripted.child];
  try {
    process.stderr.write('building ~100 KB bodies from the harness fixtures…\n');
    const bodies = await buildBodies(scripted.url, dir);
    await stop(scripted.child);
    const up = hooked('upstream');
    const upstream = await spawnJsonLine([...up.args, '--import', 'tsx', path.join(ROOT, 'bench/bridging-upstream.ts'), '--constant'], up.env);
    const rl = hooked('relay');
    const relay = await spawnJsonLine([...rl.args, path.join(ROOT, 'bench/bare-relay.mjs'), upstream.url], rl.env);
    const polar = await startPolar(path.join(ROOT, 'bin/polar.js'), upstream.url, path.join(dir, 'hops.db'), hooked('polar'));
    children.push(upstream.child, relay.child, polar.child);
    const pools: Record<PathName, Pool> = {
      direct: new Pool(upstream.url, { connections: 1 }),
      relay: new Pool(relay.url, { connections: 1 }),
      polar: new Pool(polar.url, { connections: 1 }),
    };
    const calls: Call[] = [];
    for (const body of bodies) {
      const api = apiName(body);
      for (let round = -WARMUP; round < CALLS; round++) {
        for (const name of turnOrder(PATHS, round + WARMUP)) {
          const [p, text] = name === 'polar' ? [`/s/hops${body.harness.path}`, body.harness.text] : ['/v1/chat/completions', body.chat.text];
          const t = await send(pools[name], p, text);
          if (round >= 0) calls.push({ api, path: name, round, ...t });
        }
      }
      process.stderr.write(`${api}: ${CALLS} rounds\n`);
    }
    await Promise.all(Object.values(pools).map((p) => p.close()));
    for (const c of [upstream.child, relay.child, polar.child]) await stop(c);
    const read = (name: string) => JSON.parse(fs.readFileSync(path.join(dir, `${name}.json`), 'utf8')) as SocketEvent[];
    const events = { upstream: read('upstream'), relay: read('relay'), polar: read('polar') };
    const report = format(
      bodies.map(apiName),
      calls.map((c) => ({ ...c, segments: segment(c, events.upstream, c.path === 'direct' ? null : events[c.path]) })),
    );
    process.stdout.write(`${report}\n`);
    if (process.argv.includes('--write')) writeResultsSection('Proxy hops', report);
  } finally {
    for (const c of children) await stop(c).catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function format(apis: string[], calls: (Call & { segments: Segments })[]): string {
  const f = (x: number | undefined) => (x === undefined ? '–' : x.toFixed(2));
  const lines = [
    `## Proxy hops (${new Date().toISOString().slice(0, 10)}, ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, Node ${process.version})`,
    '',
    `\`npx tsx bench/hop-timeline.ts --write\`: where a c=1 call's time goes. Each API's ~100 KB body, non-streaming, ${CALLS} rounds of direct, bare relay and polar taking turns in a different order each round (every permutation in turn), against the tokenizing upstream; every process on the path timestamps its socket reads and writes (bench/socket-times.mjs). Segments are medians in ms; "→" segments are delivery from one process's write to the next one's read (kernel copy and waking a process that was idle); the upstream's own work is left out of "path time"; "paired Δ" is the median over rounds of the path's time minus direct's in the same round; "upstream's work Δ" the same for the upstream's work (the path's effect on the server, e.g. by competing for the cores), and "whole call Δ" for the call as the caller timed it (what \`npm run bench\` calls paired Δ).`,
    '',
    `| API | path | ${SEGMENTS.map(([, label]) => label).join(' | ')} | path time | paired Δ | upstream's work Δ | whole call Δ |`,
    `|---|---|${SEGMENTS.map(() => '---:').join('|')}|---:|---:|---:|---:|`,
  ];
  for (const api of apis) {
    const of = (p: PathName) => calls.filter((c) => c.api === api && c.path === p);
    const direct = new Map(of('direct').map((c) => [c.round, c.segments]));
    for (const p of PATHS) {
      const own = of(p);
      const seg = (k: keyof Segments) => (own[0]!.segments[k] === undefined ? undefined : median(own.map((c) => c.segments[k]!)));
      const paired = (f: (s: Segments) => number) =>
        p === 'direct' ? undefined : median(own.filter((c) => direct.has(c.round)).map((c) => f(c.segments) - f(direct.get(c.round)!)));
      lines.push(
        `| ${api} | ${p} | ${SEGMENTS.map(([k]) => f(seg(k))).join(' | ')} | ${f(median(own.map((c) => pathTime(c.segments))))} | ${p === 'direct' ? '–' : `**${f(paired(pathTime))}**`} | ${f(paired((s) => s.upstreamWork))} | ${f(paired((s) => pathTime(s) + s.upstreamWork))} |`,
      );
    }
  }
  return lines.join('\n');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
