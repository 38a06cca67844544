/**
 * The proxies side by side on production-shaped traffic, in one interleaved run:
 *
 * - upstream (bench/production-upstream.ts, its own process): vLLM's chat replies with
 *   `prompt_token_ids` for a ~20k-token prompt and a `token_id:N` logprob entry and id per sampled
 *   token (a few hundred), streamed one token per chunk as vLLM does; no tokenizer work per call, so
 *   what differs between paths is the proxies' work;
 * - requests: Claude Code's Anthropic Messages and Pi's OpenAI Chat grown to ~100 KB
 *   (buildBodies, from fixtures/requests), non-streaming and streaming;
 * - paths, taking turns call by call (each round another permutation, bench/paths.ts turnOrder):
 *   direct (the chat body polar sends, straight to the upstream), the bare relay
 *   (bench/bare-relay.mjs), polar (`polar proxy`, recording to SQLite), claude-code-router
 *   (bench/production-ccr.ts), and with `--baseline DIR` an earlier polar build.
 *
 * Reported: added p50/p99 (path − direct at the same percentile) and paired Δ; each proxy process's
 * CPU over the scenario per call (all threads' on-CPU time, /proc); idle and peak RSS; the targets.
 *
 *   npm run bench:production -- [--quick] [--rounds N] [--baseline ../polar-before] [--paths relay,polar,ccr] [--bodies FILE]
 *     [--polar-node-args '--cpu-prof --cpu-prof-dir /tmp/prof'] [--write]
 *
 * POLAR_BENCH_NODE_ARGS does what --polar-node-args does (node flags for the polar child under test,
 * e.g. --cpu-prof: the profile is written when the bench stops it). `--bodies FILE` keeps the built
 * bodies for later runs. `--prompt-tokens`, `--sampled-tokens`, `--chunk-ms` go to the upstream.
 * `--write` replaces the section in bench/RESULTS.md.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { Store } from '../src/store/store.js';
import { REPLAY_PROVIDERS } from '../test/support/replay.js';
import { CCR_CHAT_MODEL, ccrVersion, startCcr } from './production-ccr.js';
import { format, type Memory, type Row, type RunInfo } from './production-report.js';
import { apiName, buildBodies, ROOT, spawnJsonLine, startPolar, stop, turnOrder, writeResultsSection, type Body } from './paths.js';

const argv = process.argv.slice(2);
const USAGE = `usage: npm run bench:production -- [--quick] [--rounds N] [--baseline DIR] [--paths relay,polar,ccr] [--bodies FILE]
  [--polar-node-args 'NODE FLAGS'] [--prompt-tokens N] [--sampled-tokens N] [--chunk-ms MS] [--write]
(the header of bench/production.ts says what each does)`;
const VALUED = ['--rounds', '--baseline', '--paths', '--bodies', '--polar-node-args', '--prompt-tokens', '--sampled-tokens', '--chunk-ms'];
if (argv.includes('--help') || argv.includes('-h')) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
// A mistyped flag (--baselin) would otherwise run the whole bench without what it asked for.
for (let i = 0; i < argv.length; i++) {
  if (VALUED.includes(argv[i]!)) i++;
  else if (argv[i] !== '--quick' && argv[i] !== '--write') {
    process.stderr.write(`bench:production: unknown argument ${JSON.stringify(argv[i])}\n${USAGE}\n`);
    process.exit(2);
  }
}
const flag = (name: string): string | undefined => {
  const at = argv.indexOf(name);
  return at >= 0 ? argv[at + 1] : undefined;
};
const quick = argv.includes('--quick');
const ROUNDS = Number(flag('--rounds') ?? (quick ? 20 : 200));
const WARMUP = quick ? 4 : 8;
const BASELINE = flag('--baseline') ? path.resolve(flag('--baseline')!) : null;
const POLAR_NODE_ARGS = (flag('--polar-node-args') ?? process.env.POLAR_BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
const PATHS = (flag('--paths') ?? 'relay,polar,ccr').split(',');
/** A token of the upstream's answer (production-upstream.ts), one delta in every streamed form. */
const ANSWER_WORD = ' listed';

/** A proxy, or the upstream itself (direct). */
interface Path {
  name: string;
  url: string;
  pid?: number;
  child?: ChildProcess;
  /** The request it takes for a scenario, or why it cannot take it. */
  request(body: Body, stream: boolean): { path: string; text: string } | { na: string };
}

interface Scenario {
  api: string;
  body: Body;
  stream: boolean;
}

interface Sample {
  ttfbMs: number;
  totalMs: number;
}

const failures = new Map<string, string[]>();

/** One call, timed; with `expect`, the reply must carry that text (the upstream's answer got through). */
async function once(pool: Pool, p: string, body: string, expect?: string): Promise<Sample & { bytes: number }> {
  const t0 = performance.now();
  const res = await pool.request({
    method: 'POST',
    path: p,
    body,
    headers: { 'content-type': 'application/json', 'x-api-key': 'bench', 'anthropic-version': '2023-06-01' },
  });
  let ttfb = -1;
  let bytes = 0;
  const kept: Buffer[] = [];
  for await (const chunk of res.body) {
    if (ttfb < 0) ttfb = performance.now() - t0;
    bytes += (chunk as Buffer).length;
    if (res.statusCode !== 200 || expect) kept.push(chunk as Buffer);
  }
  const total = performance.now() - t0;
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode} from ${p}: ${Buffer.concat(kept).toString('utf8').slice(0, 300)}`);
  if (expect && !Buffer.concat(kept).toString('utf8').includes(expect)) throw new Error(`the reply from ${p} does not carry the upstream's answer`);
  return { ttfbMs: ttfb < 0 ? total : ttfb, totalMs: total, bytes };
}

/** One call on a path; a failure is counted and reported, never averaged in. */
async function call(pool: Pool, v: Path, s: Scenario, expect?: string): Promise<(Sample & { bytes: number }) | null> {
  const r = v.request(s.body, s.stream);
  if ('na' in r) return null;
  try {
    return await once(pool, r.path, r.text, expect);
  } catch (err) {
    const list = failures.get(v.name) ?? [];
    list.push(`${s.api} ${s.stream ? 'stream' : 'json'}: ${(err as Error).message}`);
    failures.set(v.name, list);
    return null;
  }
}

/**
 * A process's CPU time in ms, two ways: the sum of its threads' on-CPU nanoseconds
 * (/proc/<pid>/task/<tid>/schedstat: fine-grained, but a thread that exits takes its time with it)
 * and utime + stime from /proc/<pid>/stat (every thread's, dead ones too, in 10 ms ticks).
 */
function cpuTime(pid: number): { fineMs: number; tickMs: number } {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const tickMs = (Number(fields[11]) + Number(fields[12])) * 10;
  let ns = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended between the listing and the read: its time is in the ticks
    }
  }
  return { fineMs: ns / 1e6, tickMs };
}

/** CPU ms between two readings: the fine figure, unless threads that ended took more than a tick of it away. */
function cpuSpent(a: { fineMs: number; tickMs: number }, b: { fineMs: number; tickMs: number }): number {
  const fine = b.fineMs - a.fineMs;
  const ticks = b.tickMs - a.tickMs;
  return ticks - fine > 20 ? ticks : fine;
}

function memMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function measure(paths: Path[], scenarios: Scenario[], pools: Map<string, Pool>): Promise<Row[]> {
  const rows: Row[] = [];
  for (const s of scenarios) {
    const live = paths.filter((v) => !('na' in v.request(s.body, s.stream)));
    // Warm-up (JIT, pools, SQLite pages), and a check that every path relays the answer.
    for (const v of live) {
      for (let i = 0; i < WARMUP; i++) await call(pools.get(v.name)!, v, s, i === 0 ? ANSWER_WORD : undefined);
    }
    const ttfb = new Map(live.map((v) => [v.name, [] as number[]]));
    const total = new Map(live.map((v) => [v.name, [] as number[]]));
    const pairedTtfb = new Map(live.map((v) => [v.name, [] as number[]]));
    const pairedTotal = new Map(live.map((v) => [v.name, [] as number[]]));
    const bytes = new Map<string, number>();
    // Each proxy's CPU over the whole scenario: it is idle while the other paths run, and work it
    // finishes after its reply (SQLite writes, GC) is still its own.
    const cpuAt = new Map(live.filter((v) => v.pid).map((v) => [v.name, cpuTime(v.pid!)]));
    for (let r = 0; r < ROUNDS; r++) {
      const round = new Map<string, Sample>();
      for (const v of turnOrder(live, r)) {
        const got = await call(pools.get(v.name)!, v, s);
        if (!got) continue;
        ttfb.get(v.name)!.push(got.ttfbMs);
        total.get(v.name)!.push(got.totalMs);
        bytes.set(v.name, got.bytes);
        round.set(v.name, got);
      }
      const direct = round.get('direct');
      if (direct) {
        for (const [name, x] of round) {
          pairedTtfb.get(name)!.push(x.ttfbMs - direct.ttfbMs);
          pairedTotal.get(name)!.push(x.totalMs - direct.totalMs);
        }
      }
    }
    await new Promise((r) => setTimeout(r, 200));
    const cpu = new Map([...cpuAt].map(([k, at]) => [k, cpuSpent(at, cpuTime(live.find((v) => v.name === k)!.pid!)) / Math.max(1, total.get(k)!.length)]));
    const na = new Map(
      paths.flatMap((v) => {
        const r = v.request(s.body, s.stream);
        return 'na' in r ? [[v.name, r.na] as const] : [];
      }),
    );
    const metrics = s.stream ? (['first byte', 'last byte'] as const) : (['total'] as const);
    for (const metric of metrics) {
      const first = metric === 'first byte';
      rows.push({
        api: s.api,
        stream: s.stream,
        metric,
        samples: first ? ttfb : total,
        paired: first ? pairedTtfb : pairedTotal,
        cpuMsPerCall: cpu,
        replyBytes: bytes,
        na,
      });
    }
    const d = pct(total.get('direct')!, 50);
    process.stderr.write(
      `${s.api} ${s.stream ? 'stream' : 'json'}: direct ${d.toFixed(1)} ms; ${live
        .filter((v) => v.name !== 'direct')
        .map((v) => `${v.name} +${(pct(total.get(v.name)!, 50) - d).toFixed(2)} ms, ${cpu.get(v.name)?.toFixed(2)} ms CPU/call`)
        .join('; ')}\n`,
    );
  }
  return rows;
}

/** Peak RSS under load: waves of 16 concurrent streamed Anthropic calls (the biggest replies) through each proxy. */
async function burst(paths: Path[], s: Scenario): Promise<void> {
  for (const v of paths) {
    if (!v.pid) continue;
    const pool = new Pool(v.url, { connections: 16 });
    for (let wave = 0; wave < 4; wave++) await Promise.all(Array.from({ length: 16 }, () => call(pool, v, s)));
    await pool.close();
  }
}

/** What polar recorded for the bench's calls: each must hold the upstream's ids, or polar skipped work. */
function recorded(db: string, promptTokens: number, sampledTokens: number): { calls: number; full: number; tokenErrors: number } {
  const store = Store.open(db, { readonly: true });
  try {
    const rows = store.requests.list('bench');
    return {
      calls: rows.length,
      full: rows.filter((r) => r.promptTokenCount === promptTokens && r.sampledTokenCount === sampledTokens).length,
      tokenErrors: rows.filter((r) => r.tokenError).length,
    };
  } finally {
    store.close();
  }
}

/**
 * Claude Code's and Pi's bodies grown to ~100 KB through this polar build. `--bodies FILE` keeps
 * them in FILE and reuses them on later runs (profiling round trips); leave it out for a result.
 */
async function loadBodies(dir: string): Promise<Body[]> {
  const file = flag('--bodies');
  if (file && fs.existsSync(file)) {
    const saved = JSON.parse(fs.readFileSync(file, 'utf8')) as (Omit<Body, 'provider'> & { provider: string })[];
    return saved.map((b) => ({ ...b, provider: REPLAY_PROVIDERS.find((p) => p.harness === b.provider)! }));
  }
  process.stderr.write('building ~100 KB bodies from the harness fixtures…\n');
  const builder = await spawnJsonLine(['--import', 'tsx', path.join(ROOT, 'bench/bridging-upstream.ts')]);
  const bodies = await buildBodies(builder.url, dir, ['claude-code', 'pi']).finally(() => stop(builder.child));
  if (file) fs.writeFileSync(file, JSON.stringify(bodies.map((b) => ({ ...b, provider: b.provider.harness }))));
  return bodies;
}

/** The upstream's own flags, passed through. */
function upstreamArgs(): string[] {
  return ['--prompt-tokens', '--sampled-tokens', '--chunk-ms'].flatMap((f) => (flag(f) ? [f, flag(f)!] : []));
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-production-'));
  const children: ChildProcess[] = [];
  const load = [os.loadavg()[0]!];
  try {
    const bodies = await loadBodies(dir);
    const up = await spawnJsonLine(['--import', 'tsx', path.join(ROOT, 'bench/production-upstream.ts'), ...upstreamArgs()]);
    children.push(up.child);
    const upstream = up.info as RunInfo['upstream'];
    process.stderr.write(`upstream: ${JSON.stringify(upstream)}\n`);

    // The paths. direct and the relay send the chat body polar sends; polar and claude-code-router the harness's own.
    const chatRequest = (b: Body, stream: boolean) => ({ path: '/v1/chat/completions', text: stream ? b.chat.stream.text : b.chat.text });
    const harnessRequest = (b: Body, stream: boolean) => (stream ? b.harness.stream : { path: b.harness.path, text: b.harness.text });
    const paths: Path[] = [{ name: 'direct', url: up.url, request: chatRequest }];
    if (PATHS.includes('relay')) {
      const relay = await spawnJsonLine([path.join(ROOT, 'bench/bare-relay.mjs'), up.url]);
      children.push(relay.child);
      paths.push({ name: 'relay', url: relay.url, pid: relay.child.pid!, child: relay.child, request: chatRequest });
    }
    const builds = [
      ...(BASELINE ? [{ name: 'before', bin: path.join(BASELINE, 'bin/polar.js'), args: [] as string[] }] : []),
      ...(PATHS.includes('polar') ? [{ name: BASELINE ? 'after' : 'polar', bin: path.join(ROOT, 'bin/polar.js'), args: POLAR_NODE_ARGS }] : []),
    ];
    const dbs = new Map<string, string>();
    for (const b of builds) {
      const db = path.join(dir, `${b.name}.db`);
      const polar = await startPolar(b.bin, up.url, db, { args: b.args });
      children.push(polar.child);
      dbs.set(b.name, db);
      paths.push({
        name: b.name,
        url: polar.url,
        pid: polar.child.pid!,
        child: polar.child,
        request: (body, stream) => {
          const r = harnessRequest(body, stream);
          return { path: `/s/bench${r.path}`, text: r.text };
        },
      });
    }
    let ccr: RunInfo['ccr'] = null;
    if (PATHS.includes('ccr')) {
      const started = await startCcr(up.url, dir);
      children.push(started.child);
      ccr = { version: ccrVersion(), config: started.config };
      paths.push({
        name: 'ccr',
        url: started.url,
        pid: started.child.pid!,
        child: started.child,
        request: (body, stream) => {
          const r = harnessRequest(body, stream);
          if (body.provider.harness !== 'pi') return r;
          // OpenAI Chat through it names the provider in the model ("provider,model"): its router rewrites only /v1/messages.
          return { path: r.path, text: JSON.stringify({ ...JSON.parse(r.text), model: CCR_CHAT_MODEL }) };
        },
      });
    }
    // Idle: started, nothing served yet.
    await new Promise((r) => setTimeout(r, 1500));
    const memory = new Map<string, Memory>(paths.filter((v) => v.pid).map((v) => [v.name, { idleMiB: memMiB(v.pid!, 'VmRSS'), peakMiB: Number.NaN }]));

    const chat = bodies.find((b) => b.provider.harness === 'pi')!;
    const anthropic = bodies.find((b) => b.provider.harness === 'claude-code')!;
    const scenarios: Scenario[] = [anthropic, chat].flatMap((body) => [false, true].map((stream) => ({ api: apiName(body), body, stream })));
    const pools = new Map(paths.map((v) => [v.name, new Pool(v.url, { connections: 4 })]));
    let rows: Row[];
    try {
      rows = await measure(paths, scenarios, pools);
    } finally {
      for (const p of pools.values()) await p.close();
    }
    await burst(paths, scenarios[1]!);
    for (const [name, m] of memory) m.peakMiB = memMiB(paths.find((v) => v.name === name)!.pid!, 'VmHWM');
    load.push(os.loadavg()[0]!);
    // Stopped before reading their databases (and so that --cpu-prof writes its profile).
    for (const v of paths) if (v.child) await stop(v.child);
    const checks = new Map([...dbs].map(([name, db]) => [name, recorded(db, upstream.promptTokens, upstream.sampledTokens)]));

    const report = format({
      quick,
      rounds: ROUNDS,
      baseline: BASELINE,
      bodies: bodies.map((b) => ({
        api: apiName(b),
        harness: b.provider.harness,
        bytes: Buffer.byteLength(b.harness.text),
        chatBytes: Buffer.byteLength(b.chat.text),
      })),
      upstream,
      ccr,
      paths: paths.map((v) => v.name).filter((n) => n !== 'direct'),
      polar: builds.length > 0 ? builds[builds.length - 1]!.name : null,
      rows,
      memory,
      recorded: checks,
      failures,
      load,
    });
    process.stdout.write(`${report}\n`);
    if (argv.includes('--write')) writeResultsSection('Production-shaped proxy bench', report);
    if (POLAR_NODE_ARGS.length > 0) process.stderr.write(`polar ran with node ${POLAR_NODE_ARGS.join(' ')}\n`);
  } finally {
    for (const c of children) await stop(c).catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
