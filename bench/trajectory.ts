/**
 * Reconstruction and verification speed: a synthetic database of SESSIONS sessions × 30 calls whose
 * prompts grow as real agent sessions do (each call's prompt = the previous prompt + its answer +
 * new context), reconstructed and verified with each strategy in a fresh process, so each row's
 * peak RSS is its own. Tokens are counted in per-request form (every call's prompt + sampled ids),
 * the work a strategy has to read.
 *
 *   npx tsx bench/trajectory.ts            (1,000 sessions, ~86 M tokens; appends to bench/RESULTS.md)
 *   npx tsx bench/trajectory.ts --quick    (100 sessions)
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Store } from '../src/store/store.js';
import { emptyStats, reconstruct } from '../src/trajectory/reconstruct.js';
import { getStrategy } from '../src/trajectory/registry.js';
import { verifySessions } from '../src/trajectory/verify-sessions.js';

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

function measure(db: string, strategy: string, what: 'reconstruct' | 'verify'): Record<string, number> {
  const store = Store.open(db, { readonly: true });
  const stats = emptyStats(strategy);
  const start = performance.now();
  let traces = 0;
  let violations = 0;
  if (what === 'reconstruct') {
    for (const trace of reconstruct(store, { strategy: getStrategy(strategy) }, stats)) traces += trace.request_ids.length > 0 ? 1 : 0;
  } else {
    const summary = { sessions: 0, calls: 0, traces: 0, violations: 0 };
    for (const _ of verifySessions(store, { strategy: getStrategy(strategy) }, summary)) violations++;
    traces = summary.traces;
    stats.tokensPerRequest = tokensOf(store);
  }
  const seconds = (performance.now() - start) / 1000;
  store.close();
  return { tokens: stats.tokensPerRequest, seconds, traces, violations, maxRssMiB: process.resourceUsage().maxRSS / 1024 };
}

/** Per-request-form tokens of the whole database (verification does not count them itself). */
function tokensOf(store: Store): number {
  const row = store.db.prepare('SELECT SUM(prompt_token_count + sampled_token_count) AS n FROM requests').get() as { n: number };
  return row.n;
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  process.stdout.write(JSON.stringify(measure(args[1]!, args[2]!, args[3] as 'reconstruct' | 'verify')));
  process.exit(0);
}

const quick = args.includes('--quick');
const sessions = quick ? 100 : 1000;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-bench-traj-'));
const db = path.join(dir, 'synthetic.db');
const genStart = performance.now();
generate(db, sessions);
process.stderr.write(
  `generated ${sessions} sessions × ${CALLS} calls in ${((performance.now() - genStart) / 1000).toFixed(1)} s (${(fs.statSync(db).size / 2 ** 20).toFixed(0)} MiB)\n`,
);
const rows: string[] = [];
for (const strategy of ['per-request', 'prefix-merging']) {
  for (const what of ['reconstruct', 'verify'] as const) {
    const out = execFileSync(process.execPath, [...process.execArgv, import.meta.filename, '--child', db, strategy, what], {
      encoding: 'utf8',
      maxBuffer: 1 << 20,
    });
    const r = JSON.parse(out) as Record<string, number>;
    if (r.violations! > 0) throw new Error(`${strategy} ${what}: ${r.violations} violations on a synthetic database`);
    const mtoks = r.tokens! / 1e6;
    rows.push(
      `| ${strategy} | ${what} | ${mtoks.toFixed(1)} M | ${r.seconds!.toFixed(2)} s | **${(mtoks / r.seconds!).toFixed(1)} M tokens/s** | ${r.traces} | ${r.maxRssMiB!.toFixed(0)} MiB |`,
    );
    process.stderr.write(`${rows.at(-1)}\n`);
  }
}
fs.rmSync(dir, { recursive: true, force: true });
const report = `
## Trajectories: reconstruct and verify

\`npx tsx bench/trajectory.ts\`: a synthetic database of ${sessions} sessions × ${CALLS} calls whose prompts grow as agent
sessions do (each prompt = the previous prompt + its ${SAMPLED} sampled ids + ${CONTEXT} new context tokens; ${BASE}-token
first prompt), read from SQLite and reconstructed (and, for verify, reconstructed and checked token by token
against the recordings) in a fresh process per row. Tokens are per-request form (every call's prompt +
sampled ids). Machine: ${os.cpus()[0]?.model ?? 'unknown'}, ${os.cpus().length} cores, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}${quick ? ' (--quick)' : ''}.

| strategy | work | tokens | time | throughput | traces | peak RSS |
|---|---|---:|---:|---:|---:|---:|
${rows.join('\n')}

Target: ≥ 20 M tokens/s for prefix-merging, memory flat in the number of sessions (one session in memory at a time).
`;
process.stdout.write(report);
if (!quick) {
  const file = path.resolve(import.meta.dirname, 'RESULTS.md');
  const current = fs.readFileSync(file, 'utf8');
  const at = current.indexOf('\n## Trajectories: reconstruct and verify');
  fs.writeFileSync(file, (at >= 0 ? current.slice(0, at) : `${current.trimEnd()}\n`) + report);
}
