/** bench/production.ts's report: the latency and CPU table, memory, and each target beside its measure. */
import os from 'node:os';
import path from 'node:path';

export interface Row {
  api: string;
  stream: boolean;
  metric: 'total' | 'first byte' | 'last byte';
  /** Per path, every call's time in ms. */
  samples: Map<string, number[]>;
  /** Per path, each round's call minus direct's in the same round. */
  paired: Map<string, number[]>;
  cpuMsPerCall: Map<string, number>;
  /** Bytes of the reply each path's caller received. */
  replyBytes: Map<string, number>;
  /** Paths that cannot take this scenario, with the reason. */
  na: Map<string, string>;
}

export interface Memory {
  idleMiB: number;
  peakMiB: number;
}

export interface RunInfo {
  quick: boolean;
  rounds: number;
  baseline: string | null;
  bodies: { api: string; harness: string; bytes: number; chatBytes: number }[];
  upstream: { url: string; replyBytes: number; streamBytes: number; promptTokens: number; sampledTokens: number };
  ccr: { version: string; config: Record<string, unknown> } | null;
  /** The proxies, in column order. */
  paths: string[];
  /** The polar build the targets are checked on (the newest), if polar ran. */
  polar: string | null;
  rows: Row[];
  memory: Map<string, Memory>;
  recorded: Map<string, { calls: number; full: number; tokenErrors: number }>;
  failures: Map<string, string[]>;
  /** 1-minute load average at the start and at the end. */
  load: number[];
}

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const f = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? '–' : x.toFixed(2));
const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;
const mark = (ok: boolean) => (ok ? 'yes' : '**no**');

export const TARGETS = {
  cpuRatio: 3,
  addedOverRelayMs: 1,
  ccrRatio: 30,
  idleMiB: 60,
  peakMiB: 100,
};

export function format(run: RunInfo): string {
  const lines: string[] = [];
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  lines.push(
    `## Production-shaped proxy bench (${new Date().toISOString().slice(0, 10)}, ${cpu}, ${os.cpus().length} cores, Node ${process.version}${run.quick ? ', --quick' : ''})`,
  );
  lines.push('');
  const u = run.upstream;
  lines.push(
    `\`npm run bench:production\` (bench/production.ts${run.baseline ? `, \`--baseline\` ${path.basename(run.baseline)}` : ''}), ${run.rounds} rounds per scenario, load average ${run.load.map((l) => l.toFixed(1)).join(' → ')}. ` +
      `Upstream (bench/production-upstream.ts, its own process, no tokenizer work per call): vLLM's chat reply with \`prompt_token_ids\` for a ${u.promptTokens}-token prompt and ${u.sampledTokens} sampled tokens, each with its id and a \`token_id:N\` logprob entry: ${kb(u.replyBytes)} non-streaming, ${kb(u.streamBytes)} streamed as one chunk per token. ` +
      `Requests: ${run.bodies.map((b) => `${b.api} (${b.harness}) ${kb(b.bytes)}`).join(', ')}; direct and the bare relay send the chat body polar sends upstream (${run.bodies.map((b) => kb(b.chatBytes)).join(', ')}). ` +
      `${run.ccr ? `claude-code-router ${run.ccr.version} (\`ccr start\`, logging off, one provider for the upstream; OpenAI Chat sent with \`model: "${String((run.ccr.config.Router as { default: string }).default)}"\`). ` : ''}` +
      'The paths take turns call by call at concurrency 1, each round in another order (every permutation in turn). "added" = path − direct at the same percentile; "paired Δ" = median over rounds of the path\'s call minus direct\'s in the same round; CPU = the proxy process\'s on-CPU time, all threads (/proc/<pid>/task/*/schedstat), over the scenario (warm-up excluded) per call. Load generator, upstream and proxies share the cores.',
  );
  lines.push('');
  const p = run.paths;
  const cols = (fn: (name: string) => string) => p.map(fn).join(' | ');
  const dashes = p.map(() => '---:').join('|');
  lines.push(
    `| API | metric | n | direct p50 | ${cols((x) => `${x} added p50`)} | ${cols((x) => `${x} paired Δ`)} | ${cols((x) => `${x} added p99`)} | ${cols((x) => `${x} CPU ms/call`)} |`,
  );
  lines.push(`|---|---|---:|---:|${dashes}|${dashes}|${dashes}|${dashes}|`);
  for (const r of run.rows) {
    const d = r.samples.get('direct')!;
    const cell = (name: string, fn: () => string) => (r.na.has(name) ? 'n/a' : fn());
    const added = (name: string, q: number) => pct(r.samples.get(name)!, q) - pct(d, q);
    lines.push(
      `| ${r.api} | ${r.stream ? `streamed, ${r.metric}` : r.metric} | ${d.length} | ${f(pct(d, 50))} | ${cols((x) => cell(x, () => (x === run.polar ? `**${f(added(x, 50))}**` : f(added(x, 50)))))} | ${cols((x) => cell(x, () => f(pct(r.paired.get(x)!, 50))))} | ${cols((x) => cell(x, () => f(added(x, 99))))} | ${cols((x) => cell(x, () => f(r.cpuMsPerCall.get(x))))} |`,
    );
  }
  lines.push('');
  lines.push(
    `Reply bytes the caller received: ${run.rows
      .filter((r) => r.metric !== 'first byte')
      .map(
        (r) =>
          `${r.api}${r.stream ? ' streamed' : ''}: ${['direct', ...p]
            .filter((x) => r.replyBytes.has(x))
            .map((x) => `${x} ${kb(r.replyBytes.get(x)!)}`)
            .join(', ')}`,
      )
      .join('; ')}.`,
  );
  const na = new Map(run.rows.flatMap((r) => [...r.na]));
  if (na.size > 0) lines.push('', `n/a: ${[...na].map(([k, v]) => `${k}: ${v}`).join('; ')}.`);
  lines.push('');
  lines.push(...targets(run));
  lines.push('');
  lines.push(`| proxy | idle RSS | peak RSS (the run, then 4 waves of 16 concurrent streamed Anthropic calls) |`);
  lines.push('|---|---:|---:|');
  for (const [name, m] of run.memory) lines.push(`| ${name} | ${m.idleMiB.toFixed(1)} MiB | ${m.peakMiB.toFixed(1)} MiB |`);
  lines.push('');
  for (const [name, c] of run.recorded) {
    lines.push(
      `${name} recorded ${c.calls} calls, ${c.full} of them with all ${u.promptTokens} prompt and ${u.sampledTokens} sampled ids${c.tokenErrors ? `, ${c.tokenErrors} with a token error` : ''}.`,
    );
  }
  lines.push(
    run.failures.size === 0 ? 'Failed calls: none.' : `Failed calls: ${[...run.failures].map(([k, v]) => `${k} ${v.length} (first: ${v[0]})`).join('; ')}.`,
  );
  return lines.join('\n');
}

/** Each target beside what this run measured, per API and metric, for the newest polar build. */
function targets(run: RunInfo): string[] {
  const polar = run.polar;
  if (!polar) return ['Targets: polar did not run (--paths).'];
  const lines = [
    `Targets (${polar}): CPU per call ≤ ${TARGETS.cpuRatio}× the relay's; added p50 ≤ the relay's + ${TARGETS.addedOverRelayMs} ms; added p50 ≥ ${TARGETS.ccrRatio}× below claude-code-router's; idle RSS ≤ ${TARGETS.idleMiB} MiB, peak ≤ ${TARGETS.peakMiB} MiB.`,
    '',
    `| API | metric | ${polar}/relay CPU | met | ${polar} − relay added p50 (ms) | met | ccr/${polar} added p50 | met |`,
    '|---|---|---:|---|---:|---|---:|---|',
  ];
  for (const r of run.rows) {
    const d = pct(r.samples.get('direct')!, 50);
    const added = (name: string) => (r.samples.has(name) ? pct(r.samples.get(name)!, 50) - d : Number.NaN);
    const cpuRatio = (r.cpuMsPerCall.get(polar) ?? Number.NaN) / (r.cpuMsPerCall.get('relay') ?? Number.NaN);
    const over = added(polar) - added('relay');
    const ccr = added('ccr') / added(polar);
    // A ratio over a polar figure at or below zero (noise at c=1) says nothing.
    const ccrCell = r.na.has('ccr')
      ? ['n/a', '–']
      : !r.samples.has('ccr')
        ? ['–', '–']
        : added(polar) <= 0
          ? ['n/a (polar ≤ 0)', '–']
          : [f(ccr), Number.isNaN(ccr) ? '–' : mark(ccr >= TARGETS.ccrRatio)];
    lines.push(
      `| ${r.api} | ${r.stream ? `streamed, ${r.metric}` : r.metric} | ${f(cpuRatio)} | ${Number.isNaN(cpuRatio) ? '–' : mark(cpuRatio <= TARGETS.cpuRatio)} | ${f(over)} | ${Number.isNaN(over) ? '–' : mark(over <= TARGETS.addedOverRelayMs)} | ${ccrCell.join(' | ')} |`,
    );
  }
  const m = run.memory.get(polar);
  if (m) {
    lines.push('');
    lines.push(
      `${polar} memory: idle ${m.idleMiB.toFixed(1)} MiB (≤ ${TARGETS.idleMiB}: ${mark(m.idleMiB <= TARGETS.idleMiB)}), peak ${m.peakMiB.toFixed(1)} MiB (≤ ${TARGETS.peakMiB}: ${mark(m.peakMiB <= TARGETS.peakMiB)}).`,
    );
  }
  return lines;
}
