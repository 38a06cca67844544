/**
 * Reconstruction and verification speed: a synthetic database of SESSIONS sessions × 30 calls whose
 * prompts grow as real agent sessions do (each call's prompt = the previous prompt + its answer +
 * new context), reconstructed and verified with each strategy in a fresh process, so each row's
 * peak RSS is its own. Tokens are counted in per-request form (every call's prompt + sampled ids),
 * the work a strategy has to read. Each row runs twice: in-process (`library`: the generator alone,
 * nothing written) and as a user runs it (`cli`: `polar reconstruct --out /dev/null` and
 * `polar verify-faithfulness`, wall time including Node's start-up and the JSONL written).
 *
 *   npx tsx bench/trajectory.ts                    (1,000 sessions, ~86 M tokens)
 *   npx tsx bench/trajectory.ts --quick            (100 sessions)
 *   npx tsx bench/trajectory.ts --sessions 100,1000 --baseline /tmp/traj-before --rounds 3
 *
 * `--sessions` runs each size in turn (linearity: tokens/s should not fall as the store grows).
 * `--baseline DIR`: an earlier checkout, built (its bin/polar.js and dist/ for the cli rows; its src/
 * imported by this bench's --child for the library rows), run beside this one row by row, turn about, so
 * "before" and "after" come from one run under the same load. `--rounds N`: each measurement N
 * times, the fastest kept (the machine is shared; the fastest is the least disturbed). `--write`
 * replaces the section in bench/RESULTS.md.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Store } from '../src/store/store.js';

const CALLS = 30;
const BASE = 600;
const SAMPLED = 100;
const CONTEXT = 50;

function generate(db: string, sessions: number): void {
  const store = Store.open(db);
  const insert = store.db.transaction((s: number) => {
    const id = `ses-${s}`;
    store.sessions.ensure(id, { harness: 'synthetic' });
    let prompt = Array.from({ length: BASE }, (_, i) => (s * 7919 + i * 31) % 150_000);
    for (let k = 0; k < CALLS; k++) {
      const sampled = Array.from({ length: SAMPLED }, (_, i) => (s * 13 + k * 101 + i * 7) % 150_000);
      const req = `${id}-c${k}`;
      store.requests.begin({
        id: req,
        sessionId: id,
        agentId: 'main',
        provider: 'openai-chat',
        method: 'POST',
        path: '/v1/chat/completions',
        startedAt: k,
        streamed: true,
        requestHeaders: {},
        requestedModel: 'm',
        servedModel: 'm',
      });
      store.requests.writeBodies(req, { originalRequest: '{}', upstreamRequest: '{"tools":[{}]}' });
      store.requests.end(req, {
        endedAt: k + 1,
        status: 'ok',
        httpStatus: 200,
        reply: '',
        finishReason: 'stop',
        tokens: { source: 'upstream', promptIds: prompt, sampledIds: sampled, logprobs: sampled.map((_, i) => -((i % 17) + 1) / 9) },
      });
      prompt = [...prompt, ...sampled, ...Array.from({ length: CONTEXT }, (_, i) => (k * 17 + i) % 150_000)];
    }
  });
  for (let s = 0; s < sessions; s++) insert(s);
  store.close();
}

/**
 * One measurement, in this process: the build at `root` (its own store, reconstruct and verify
 * modules, imported from its src/, so "before" and "after" are timed by the same code). CPU time
 * beside wall time: on a shared machine the wall clock also counts the time other processes had.
 */
async function measure(root: string, db: string, strategy: string, what: 'reconstruct' | 'verify'): Promise<Record<string, number>> {
  const from = (file: string) => import(path.join(root, 'src', file));
  const { Store: BuildStore } = (await from('store/store.ts')) as typeof import('../src/store/store.js');
  const { emptyStats, reconstruct } = (await from('trajectory/reconstruct.ts')) as typeof import('../src/trajectory/reconstruct.js');
  const { getStrategy } = (await from('trajectory/registry.ts')) as typeof import('../src/trajectory/registry.js');
  const { verifySessions } = (await from('trajectory/verify-sessions.ts')) as typeof import('../src/trajectory/verify-sessions.js');
  const store = BuildStore.open(db, { readonly: true });
  const stats = emptyStats(strategy);
  const start = performance.now();
  const cpu = process.cpuUsage();
  let traces = 0;
  let violations = 0;
  if (what === 'reconstruct') {
    for (const trace of reconstruct(store, { strategy: getStrategy(strategy) }, stats)) traces += trace.request_ids.length > 0 ? 1 : 0;
  } else {
    const summary = { sessions: 0, calls: 0, traces: 0, violations: 0 };
    for (const _ of verifySessions(store, { strategy: getStrategy(strategy) }, summary)) violations++;
    traces = summary.traces;
  }
  const used = process.cpuUsage(cpu);
  const seconds = (performance.now() - start) / 1000;
  store.close();
  return { seconds, cpuSeconds: (used.user + used.system) / 1e6, traces, violations, maxRssMiB: process.resourceUsage().maxRSS / 1024 };
}

/** Per-request-form tokens of the whole database (verification does not count them itself). */
function tokensOf(store: Store): number {
  const row = store.db.prepare('SELECT SUM(prompt_token_count + sampled_token_count) AS n FROM requests').get() as { n: number };
  return row.n;
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  process.stdout.write(
    JSON.stringify(await measure(args[4] ?? path.resolve(import.meta.dirname, '..'), args[1]!, args[2]!, args[3] as 'reconstruct' | 'verify')),
  );
  process.exit(0);
}

function flag(name: string): string | undefined {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
}
const quick = args.includes('--quick');
const sizes = (flag('--sessions') ?? (quick ? '100' : '1000')).split(',').map(Number);
const ROUNDS = Number(flag('--rounds') ?? 1);
const BASELINE = flag('--baseline') ? path.resolve(flag('--baseline')!) : null;
const HERE = path.resolve(import.meta.dirname, '..');
const builds: { name: string; root: string }[] = [...(BASELINE ? [{ name: 'before', root: BASELINE }] : []), { name: BASELINE ? 'after' : 'this', root: HERE }];

interface Run {
  seconds: number;
  /** User + system CPU seconds, where measured. */
  cpuSeconds: number | null;
  traces?: number;
  maxRssMiB?: number;
}

/** The library row: this bench's --child, timing the build's own modules in a fresh process. */
function libraryRun(root: string, db: string, strategy: string, what: 'reconstruct' | 'verify'): Run {
  const out = execFileSync(process.execPath, [...process.execArgv, import.meta.filename, '--child', db, strategy, what, root], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  const r = JSON.parse(out) as Record<string, number>;
  if (r.violations! > 0) throw new Error(`${root} ${strategy} ${what}: ${r.violations} violations on a synthetic database`);
  return { seconds: r.seconds!, cpuSeconds: r.cpuSeconds!, traces: r.traces!, maxRssMiB: r.maxRssMiB! };
}

/** GNU time, for a child's CPU seconds (spawnSync does not report them); without it, wall time only. */
const TIME = fs.existsSync('/usr/bin/time') ? '/usr/bin/time' : null;

/** The cli row: bin/polar.js as a user runs it, timed from spawn to exit (Node's start-up included). */
function cliRun(root: string, db: string, strategy: string, what: 'reconstruct' | 'verify'): Run {
  const argv =
    what === 'reconstruct'
      ? ['reconstruct', '--db', db, '--strategy', strategy, '--out', '/dev/null']
      : ['verify-faithfulness', '--db', db, '--strategy', strategy];
  const cpuFile = path.join(os.tmpdir(), `polar-bench-traj-cpu-${process.pid}`);
  const command = [process.execPath, path.join(root, 'bin/polar.js'), ...argv];
  const start = performance.now();
  const r = TIME
    ? spawnSync(TIME, ['-f', '%U %S', '-o', cpuFile, ...command], { encoding: 'utf8', maxBuffer: 1 << 24 })
    : spawnSync(command[0]!, command.slice(1), { encoding: 'utf8', maxBuffer: 1 << 24 });
  const seconds = (performance.now() - start) / 1000;
  if (r.status !== 0) throw new Error(`${root} polar ${argv.join(' ')} exited ${r.status}: ${r.stderr}`);
  let cpuSeconds: number | null = null;
  if (TIME) {
    const [user, system] = fs.readFileSync(cpuFile, 'utf8').trim().split(/\s+/).map(Number);
    fs.rmSync(cpuFile, { force: true });
    cpuSeconds = user! + system!;
  }
  return { seconds, cpuSeconds };
}

const loadAtStart = os
  .loadavg()
  .map((l) => l.toFixed(2))
  .join(' ');
// The cli rows' fixed cost: Node's start-up and polar's modules, timed on an empty store.
const startup = (() => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-bench-traj-'));
  const db = path.join(dir, 'empty.db');
  Store.open(db).close();
  const best = builds.map((b) => {
    let kept: Run | null = null;
    for (let i = 0; i < Math.max(ROUNDS, 3); i++) {
      const r = cliRun(b.root, db, 'prefix-merging', 'verify');
      if (!kept || r.seconds < kept.seconds) kept = r;
    }
    return `${b.name} ${kept!.seconds.toFixed(2)} s${kept!.cpuSeconds !== null ? ` (CPU ${kept!.cpuSeconds.toFixed(2)} s)` : ''}`;
  });
  fs.rmSync(dir, { recursive: true, force: true });
  return best.join(', ');
})();
const rows: string[] = [];
const rate = (tokens: number, r: Run) => tokens / 1e6 / r.seconds;
for (const sessions of sizes) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-bench-traj-'));
  const db = path.join(dir, 'synthetic.db');
  const genStart = performance.now();
  generate(db, sessions);
  process.stderr.write(
    `generated ${sessions} sessions × ${CALLS} calls in ${((performance.now() - genStart) / 1000).toFixed(1)} s (${(fs.statSync(db).size / 2 ** 20).toFixed(0)} MiB)\n`,
  );
  const store = Store.open(db, { readonly: true });
  const tokens = tokensOf(store);
  store.close();
  for (const strategy of ['per-request', 'prefix-merging']) {
    for (const what of ['reconstruct', 'verify'] as const) {
      for (const mode of ['library', 'cli'] as const) {
        // Builds in turns within a round, so a burst of load falls on both.
        const best = new Map<string, Run>();
        for (let round = 0; round < ROUNDS; round++) {
          for (const b of builds) {
            const r = mode === 'library' ? libraryRun(b.root, db, strategy, what) : cliRun(b.root, db, strategy, what);
            const kept = best.get(b.name);
            if (!kept || r.seconds < kept.seconds) best.set(b.name, r);
          }
        }
        const cells = builds.map((b) => {
          const r = best.get(b.name)!;
          const cpu = r.cpuSeconds !== null ? ` (CPU ${r.cpuSeconds.toFixed(2)} s, ${(tokens / 1e6 / r.cpuSeconds).toFixed(1)})` : '';
          return `${r.seconds.toFixed(2)} s · **${rate(tokens, r).toFixed(1)}**${cpu}${r.maxRssMiB ? ` · ${r.maxRssMiB.toFixed(0)} MiB` : ''}`;
        });
        const speedup = BASELINE ? ` | ${(best.get('before')!.seconds / best.get('after')!.seconds).toFixed(1)}×` : '';
        rows.push(`| ${sessions} | ${strategy} | ${what} | ${mode} | ${(tokens / 1e6).toFixed(1)} M | ${cells.join(' | ')}${speedup} |`);
        process.stderr.write(`${rows.at(-1)}\n`);
      }
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
}
const load = os
  .loadavg()
  .map((l) => l.toFixed(2))
  .join(' ');
const header = builds.map((b) => `${b.name}: wall · M tokens/s (CPU, M tokens/CPU-s) · peak RSS`).join(' | ');
const report = `
## Trajectories: reconstruct and verify

\`npx tsx bench/trajectory.ts ${args.filter((a) => a !== '--write').join(' ')}\`: synthetic databases of ${sizes.join(' and ')} sessions × ${CALLS} calls whose
prompts grow as agent sessions do (each prompt = the previous prompt + its ${SAMPLED} sampled ids + ${CONTEXT} new context tokens; ${BASE}-token
first prompt), stored as polar stores them (each prompt a delta against the call before), read from SQLite and
reconstructed (and, for verify, reconstructed and checked token by token against the recordings and their
capture digests) in a fresh process per measurement. \`library\`: the generator alone, in-process; \`cli\`:
\`polar reconstruct --out /dev/null\` / \`polar verify-faithfulness\`, wall time from spawn to exit (Node's
start-up and, for reconstruct, the JSONL included). Tokens are per-request form (every call's prompt + sampled
ids). Wall time, and in brackets CPU time (user + system) and tokens per CPU-second, the figure the
machine's other load disturbs least. Fastest of ${ROUNDS}${BASELINE ? `, builds in turns (before: ${path.basename(BASELINE)})` : ''}. Machine: ${os.cpus()[0]?.model ?? 'unknown'}, ${os.cpus().length} cores, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}, 1/5/15-min load ${loadAtStart} at the start, ${load} at the end.

| sessions | strategy | work | path | tokens | ${header}${BASELINE ? ' | speed-up' : ''} |
|---:|---|---|---|---:|${builds.map(() => '---:|').join('')}${BASELINE ? '---:|' : ''}
${rows.join('\n')}

\`polar verify-faithfulness\` on an empty store (the cli rows' start-up, most of their time at 100 sessions): ${startup}.

Target: ≥ 20 M tokens/s on 1,000 sessions, the same rate at 100 (linear in tokens), memory flat in the number of sessions (one session in memory at a time).
`;
process.stdout.write(report);
if (args.includes('--write')) {
  const file = path.resolve(import.meta.dirname, 'RESULTS.md');
  const current = fs.readFileSync(file, 'utf8');
  const at = current.indexOf('\n## Trajectories: reconstruct and verify');
  const next = at >= 0 ? current.indexOf('\n## ', at + 1) : -1;
  fs.writeFileSync(file, (at >= 0 ? current.slice(0, at) : `${current.trimEnd()}\n`) + report + (next >= 0 ? current.slice(next) : ''));
}
