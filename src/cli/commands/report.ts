import path from 'node:path';
import type { Command } from 'commander';
import { PolarError } from '../../core/errors.js';
import { writePrivateFile } from '../../core/private-file.js';
import { loadReport } from '../../inspect/report-data.js';
import { renderReport } from '../../inspect/report-html.js';
import { TokenPieces } from '../../inspect/token-strip.js';
import { defaultDbPath } from '../../store/store.js';
import { openStore } from '../../store/open.js';
import { loadTokenText } from '../../trajectory/tokenizer.js';
import { action, printJson } from '../output.js';
import { count } from '../plural.js';

interface ReportOptions {
  db?: string;
  rollout?: string;
  out?: string;
  tokenizer?: string;
  json?: boolean;
}

export function registerReport(program: Command): void {
  program
    .command('report')
    .description('write a session, or every session of a rollout, as one self-contained HTML file to open in a browser')
    .argument('[session]', 'session id (see `polar sessions`)')
    .option('--rollout <id>', 'every session of this rollout, with its groups, rewards and advantages (see `polar rollouts`)')
    .option('--out <file>', 'the HTML file to write (default: report-<id>.html)')
    .option('--tokenizer <path>', "decode token text (the model's folder or tokenizer.json, or bundled:qwen3); without it tokens show as ids")
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
The file needs no network and runs no scripts: the conversation as the harness sent it, each call's
tokens (prompt dimmed, sampled coloured by logprob, id and logprob on hover), the prefix-merged traces
with their chains, breaks and loss mask, and a rollout's rewards and advantages.

Examples:
  polar report ses_01kc… --tokenizer bundled:qwen3 --out report.html
  polar report --rollout rol_01kc… --tokenizer ~/models/Qwen3-8B`,
    )
    .action(action(writeReport));
}

async function writeReport(sessionId: string | undefined, opts: ReportOptions): Promise<void> {
  if ((sessionId === undefined) === (opts.rollout === undefined)) throw new PolarError('POLAR_USAGE', 'name one session, or one rollout with --rollout ID');
  const text = opts.tokenizer ? loadTokenText(opts.tokenizer) : undefined;
  const store = await openStore(opts.db ?? defaultDbPath(), { readonly: true });
  try {
    const data = loadReport(store, opts.rollout ? { rollout: opts.rollout } : { session: sessionId! }, text);
    const id = opts.rollout ?? sessionId!;
    const out = path.resolve(opts.out ?? `report-${id}.html`);
    const html = renderReport(data, {
      title: `polar report · ${opts.rollout ? 'rollout' : 'session'} ${id}`,
      generatedAt: new Date(),
      pieces: new TokenPieces(text),
      decoded: text !== undefined,
    });
    // 0600: the page holds the recording itself (prompts, token ids, logprobs), like the database.
    writePrivateFile(out, html);
    const summary = {
      ok: true,
      out,
      sessions: data.sessions.length,
      calls: data.sessions.reduce((a, s) => a + s.model.session.requests, 0),
      traces: data.sessions.reduce((a, s) => a + s.model.traces.length, 0),
      bytes: Buffer.byteLength(html),
    };
    if (opts.json) printJson(summary);
    else {
      process.stdout.write(
        `wrote ${out}: ${count(summary.sessions, 'session')}, ${count(summary.calls, 'call')}, ${count(summary.traces, 'trace')}, ${(summary.bytes / 1024).toFixed(0)} KiB\n`,
      );
      if (!text) process.stdout.write('tokens show as ids; pass --tokenizer PATH (the model folder, or bundled:qwen3 for the mock) to decode them\n');
      process.stdout.write(`open it: file://${out}\n`);
    }
  } finally {
    store.close();
  }
}
