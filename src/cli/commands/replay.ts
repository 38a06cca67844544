import chalk from 'chalk';
import { Option, type Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { HARNESS_NAMES } from '../../harness/registry.js';
import { startMockServer } from '../../mock-server/server.js';
import { describe, startCassette } from '../../replay/cassette.js';
import { combine, compareLogprobs, type LogprobComparison } from '../../replay/divergence-stats.js';
import { replaySession } from '../../replay/replay-session.js';
import { defaultDbPath } from '../../store/store.js';
import { openStore } from '../../store/open.js';
import { loadTokenText } from '../../trajectory/tokenizer.js';
import { Rescorer, type RescoreKind } from '../../upstream/rescore.js';
import { integerArg, policyShiftArg, secondsArg } from '../numbers.js';
import { action, jsonLines, printJson, table } from '../output.js';
import { count } from '../plural.js';

interface ReplayOptions {
  db?: string;
  serve?: boolean;
  port: number;
  harness?: string;
  cwd?: string;
  command?: string;
  harnessBin?: string;
  node?: string;
  timeout?: number;
  upstream?: string;
  mockPolicyShift?: { every: number; delta: number };
  rescore?: boolean;
  upstreamKind: RescoreKind;
  model?: string;
  tokenizer?: string;
  out?: string;
  json?: boolean;
}

export function registerReplay(program: Command): void {
  program
    .command('replay')
    .description('replay a recorded session with no model (a cassette upstream), or re-score its tokens on another server')
    .argument('<session>', 'session id (see `polar sessions`)')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--serve', 'serve the session as a cassette upstream: polar run --harness H --upstream <url> replays it')
    .option('--port <n>', 'with --serve: port (0: any free one)', integerArg('--port', 0, 65535), 0)
    .addOption(
      new Option('--harness <name>', 'replay now: run this harness against the cassette in a fresh workspace and report matched / diverged').choices([
        ...HARNESS_NAMES,
      ]),
    )
    .option('--cwd <dir>', 'with --harness: the workspace (default: a new one, made from the task for a rollout sample)')
    .option('--command <template>', 'with --harness custom')
    .option('--harness-bin <path>', 'the harness executable')
    .option('--node <path>', 'a Node.js binary for harnesses that need a newer one')
    .option('--timeout <seconds>', 'with --harness: end the replay after this long', secondsArg('--timeout'))
    .option(
      '--upstream <url>',
      "with --rescore: the server that scores the recorded tokens; `mock` starts polar's mock model for it (the policy the demo sampled from)",
    )
    .option(
      '--mock-policy-shift <every:delta>',
      'with --upstream mock: let the mock disagree by DELTA at every EVERY-th position, e.g. 4:0.5',
      policyShiftArg('--mock-policy-shift'),
    )
    .option('--rescore', 'ask --upstream for the logprobs of the recorded tokens and compare them with the recorded ones')
    .addOption(
      new Option('--upstream-kind <kind>', 'with --rescore: vllm and vllm-tito use /v1/completions prompt_logprobs; sglang-tito /generate logprob_start_len')
        .choices(['vllm', 'vllm-tito', 'sglang-tito'])
        .default('vllm'),
    )
    .option('--model <name>', "with --rescore: the model to ask for (default: the session's)")
    .option('--tokenizer <path>', 'with --rescore: decode the worst positions (a model folder, or bundled:qwen3)')
    .option('--out <file>', 'with --rescore: JSONL per call with the sampled ids and both logprob arrays (for importance-sampling correction)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Examples:
  polar replay ses_01kc… --harness claude-code          # replay the session, no model needed
  polar replay ses_01kc… --serve --port 8300            # then: polar run --harness claude-code --upstream http://127.0.0.1:8300 --prompt "…"
  polar replay ses_01kc… --rescore --upstream http://gpu-box:8000 --tokenizer ~/models/Qwen3-8B
  polar replay ses_01kc… --rescore --upstream mock --mock-policy-shift 4:0.5   # a demo session against a shifted mock`,
    )
    .action(action(replay));
}

async function replay(session: string, opts: ReplayOptions): Promise<void> {
  const modes = [opts.serve, opts.harness !== undefined, opts.rescore].filter(Boolean).length;
  if (modes !== 1) throw new PolarError('POLAR_USAGE', 'choose one: --serve, --harness NAME, or --rescore --upstream URL');
  const dbPath = opts.db ?? defaultDbPath();
  if (opts.serve) return serve(session, dbPath, opts);
  if (opts.rescore) return rescore(session, dbPath, opts);
  const r = await replaySession({
    dbPath,
    session,
    harness: opts.harness!,
    ...(opts.command !== undefined ? { command: opts.command } : {}),
    ...(opts.harnessBin ? { harnessBin: opts.harnessBin } : {}),
    ...(opts.node ? { nodeBin: opts.node } : {}),
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
    ...(opts.timeout ? { timeoutSec: opts.timeout } : {}),
  });
  const ok = r.divergence === null && r.unplayed.length === 0;
  if (opts.json) printJson({ ok, ...r, run: { status: r.run.status, exitCode: r.run.exitCode, logFile: r.run.logFile } });
  else {
    process.stdout.write(
      `${ok ? chalk.green('matched') : chalk.yellow('diverged')}: ${r.matched} of ${r.total} recorded calls replayed by ${opts.harness} (replay recorded as ${r.replaySession}; harness ${r.run.status}, log ${r.run.logFile})\n`,
    );
    if (r.divergence) process.stdout.write(`  ${describe(r.divergence)}\n`);
    if (r.unplayed.length > 0) process.stdout.write(`  never replayed: ${r.unplayed.map((u) => `#${u.seq}`).join(', ')}\n`);
  }
  process.exitCode = ok ? 0 : 1;
}

async function serve(session: string, dbPath: string, opts: ReplayOptions): Promise<void> {
  const store = await openStore(dbPath, { readonly: true });
  const cassette = await startCassette(store, session, { port: opts.port });
  if (opts.json) process.stdout.write(`${JSON.stringify({ url: cassette.url, model: cassette.model, calls: cassette.total() })}\n`);
  else
    process.stdout.write(
      `${chalk.bold('polar replay')} serving session ${session} (${count(cassette.total(), 'call')}, model ${cassette.model}) on ${cassette.url}\n  try: polar run --harness <name> --upstream ${cassette.url} --prompt "…"\n`,
    );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  const d = cassette.divergence();
  process.stderr.write(`${cassette.matched()} of ${count(cassette.total(), 'call')} replayed${d ? `; ${describe(d)}` : ''}\n`);
  await cassette.close();
  store.close();
}

async function rescore(session: string, dbPath: string, opts: ReplayOptions): Promise<void> {
  if (!opts.upstream) throw new PolarError('POLAR_USAGE', '--rescore needs --upstream URL: the server whose logprobs to compare');
  const store = await openStore(dbPath, { readonly: true });
  const summary = store.sessions.get(session);
  if (!summary) {
    store.close();
    throw new PolarError('POLAR_USAGE', `no session ${JSON.stringify(session)} in this database; list them with \`polar sessions\``);
  }
  const text = opts.tokenizer ? loadTokenText(opts.tokenizer) : undefined;
  if (opts.mockPolicyShift && opts.upstream !== 'mock') throw new PolarError('POLAR_USAGE', '--mock-policy-shift applies to --upstream mock only');
  const mock =
    opts.upstream === 'mock' ? await startMockServer({ port: 0, log: false, ...(opts.mockPolicyShift ? { policyShift: opts.mockPolicyShift } : {}) }) : null;
  const upstreamUrl = mock ? mock.url : opts.upstream;
  const label = mock
    ? `polar's mock model${opts.mockPolicyShift ? ` shifted by ${opts.mockPolicyShift.delta} at every ${opts.mockPolicyShift.every}th position` : ''}`
    : opts.upstream;
  const rescorer = new Rescorer(
    opts.upstreamKind,
    upstreamUrl,
    opts.model ?? (mock ? mock.model : summary.servedModel) ?? 'default',
    process.env.POLAR_UPSTREAM_API_KEY || undefined,
  );
  const out = opts.out ? jsonLines(opts.out) : null;
  const calls: (LogprobComparison & { requestId: string; seq: number; agentId: string })[] = [];
  try {
    for (const row of store.requests.tokens(session)) {
      if (row.status !== 'ok' || row.tokenSource !== 'upstream' || !row.promptIds?.length || !row.sampledIds?.length || !row.logprobs) continue;
      const rescored = await rescorer.score(row.promptIds, row.sampledIds, AbortSignal.timeout(600_000));
      calls.push({
        requestId: row.id,
        seq: row.seq,
        agentId: row.agentId,
        ...compareLogprobs(row.sampledIds, row.logprobs, rescored, text ? (id) => text.decode([id]) : undefined),
      });
      await out?.write({
        session_id: session,
        request_id: row.id,
        seq: row.seq,
        sampled_ids: row.sampledIds,
        recorded_logprobs: row.logprobs,
        rescored_logprobs: rescored,
        upstream: label,
        model: opts.model ?? summary.servedModel,
      });
    }
  } finally {
    await out?.close();
    await rescorer.close();
    await mock?.close();
    store.close();
  }
  if (calls.length === 0) throw new PolarError('POLAR_USAGE', `session ${session} has no call with server token ids and logprobs to re-score`);
  const total = combine(calls);
  if (opts.json) {
    printJson({ ok: true, session, upstream: label, kind: opts.upstreamKind, ...total, calls });
    return;
  }
  const f = (n: number) => (n === 0 ? '0' : Math.abs(n) < 1e-4 ? n.toExponential(2) : n.toFixed(4));
  process.stdout.write(
    `${table(
      ['CALL', 'AGENT', 'TOKENS', 'MEAN |Δ|', 'MAX |Δ|', 'KL k1', 'KL k3', 'WORST'],
      calls.map((c) => [
        c.seq,
        c.agentId,
        c.tokens,
        f(c.meanAbsDelta),
        f(c.maxAbsDelta),
        f(c.klK1),
        f(c.klK3),
        c.worst.map((w) => `${w.text !== undefined ? JSON.stringify(w.text) : w.tokenId}@${w.position} ${f(w.delta)}`).join(', '),
      ]),
    )}\n`,
  );
  process.stdout.write(
    `session ${session}: ${total.tokens} tokens re-scored on ${label}; mean |Δ logprob| ${f(total.meanAbsDelta)}, max ${f(total.maxAbsDelta)}, KL(recorded‖rescored) ≈ ${f(total.klK3)} (k3) / ${f(total.klK1)} (k1)${opts.out ? `; logprobs written to ${opts.out}` : ''}\n`,
  );
}
