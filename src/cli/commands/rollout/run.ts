import chalk from 'chalk';
import type { Command } from 'commander';
import { PolarError } from '../../../core/errors.js';
import type { RolloutSummary } from '../../../rollout/config.js';
import { environmentNotice } from '../../../rollout/environments/choose.js';
import { rolloutSampling, runRollout, type RolloutRun } from '../../../rollout/run-rollout.js';
import { sandboxSettings } from '../../../rollout/sandboxing.js';
import { sandboxNotices, UNSANDBOXED_GROUPS } from '../../../sandbox/index.js';
import { SAMPLE_OUTCOMES } from '../../../store/rollouts.js';
import { defaultDbPath } from '../../../store/store.js';
import { describeSampling } from '../../../upstream/sampling-policy.js';
import { clip } from '../../clip.js';
import { printJson } from '../../output.js';
import { count } from '../../plural.js';
import { RolloutProgress } from '../../rollout-progress.js';
import { sandboxKind } from '../../sandbox-options.js';
import { givenOn, newArgs, resumeArgs, type RolloutOptions } from './flags.js';
import { queueRollout } from './queue.js';
import { jsonSummary, rolloutExitCode, summaryText } from './summary.js';

// `polar rollout` here: a new run or a resume, with its warnings, live progress and summary (`--queue` goes to queue.ts).

export async function rolloutCommand(opts: RolloutOptions, command: Command): Promise<void> {
  if (opts.queue) return queueRollout(opts);
  if (opts.wait) throw new PolarError('POLAR_USAGE', '--wait goes with --queue (a local rollout always waits)');
  const dbPath = opts.db ?? defaultDbPath();
  const sandbox = sandboxKind(opts);
  if (!opts.sandbox && sandbox === 'none' && !opts.json) {
    process.stderr.write(
      chalk.yellow(
        'warning: bubblewrap is not installed or cannot make a sandbox here, so harness and evaluator commands run unsandboxed with full access to this machine (Debian: apt-get install bubblewrap; or pass --sandbox none to say so)\n',
      ),
    );
  }
  const base = opts.resume ? resumeArgs(opts, sandbox, givenOn(command)) : newArgs(opts, sandbox);
  // Said even with --json (on stderr): the groups are what a rollout of several samples is for.
  if (sandbox === 'none' && 'config' in base && base.config.samples > 1)
    process.stderr.write(
      chalk.yellow(`warning: --sandbox none with --samples ${base.config.samples}: ${UNSANDBOXED_GROUPS}; use --sandbox bwrap for GRPO groups\n`),
    );
  if (!opts.json && 'config' in base) {
    for (const line of sandboxNotices(sandboxSettings(base.config, '')))
      if (opts.sandbox || !line.startsWith('sandbox none')) process.stderr.write(chalk.yellow(`notice: ${line}\n`));
    process.stderr.write(chalk.dim(`notice: ${describeSampling(rolloutSampling(base.config))}\n`));
    const chosen = environmentNotice(opts.environment, base.config.environment ?? 'host');
    if (chosen) process.stderr.write(chalk.yellow(`notice: ${chosen}\n`));
    const host = base.tasks.filter((t) => t.network === 'host').map((t) => t.id);
    if (host.length > 0 && sandbox === 'bwrap' && base.config.network !== 'host') {
      process.stderr.write(
        chalk.yellow(
          `notice: ${host.length} task(s) ask for the host network ("network": "host"): their harness reaches this machine's network, not only the proxy (${host.slice(0, 5).join(', ')}${host.length > 5 ? ', …' : ''})\n`,
        ),
      );
    }
  }
  await executeRollout({ dbPath, ...base }, { json: opts.json === true });
}

/** Runs a rollout with live progress (bars on a TTY, a line per sample otherwise) and prints its summary. */
export async function executeRollout(run: RolloutRun, opts: { json: boolean }, extra: { mock?: MockServerTasks } = {}): Promise<RolloutSummary> {
  let progress: RolloutProgress | null = null;
  const summary = await runRollout({
    ...run,
    ...(process.env.POLAR_UPSTREAM_API_KEY ? { upstreamApiKey: process.env.POLAR_UPSTREAM_API_KEY } : {}),
    onNotice: (line) => process.stderr.write(`${line}\n`),
    onStart: ({ rolloutId, samples }) => {
      if (opts.json) return;
      const done = samples.filter((s) => (SAMPLE_OUTCOMES as readonly string[]).includes(s.status)).length;
      process.stderr.write(
        `${chalk.bold('polar rollout')} ${rolloutId}: ${samples.length - done} of ${count(samples.length, 'sample')} to run${extra.mock ? ` (mock model: ${extra.mock})` : ''}\n`,
      );
      if (process.stderr.isTTY) progress = new RolloutProgress(samples.length, done);
    },
    onEvent: (e) => {
      if (progress) progress.event(e);
      else if (!opts.json && e.type === 'done') {
        process.stderr.write(
          `  ${e.sampleId} ${e.outcome}${e.reward !== null ? ` reward ${e.reward}` : ''}${e.error ? chalk.dim(` ${clip(e.error, 240)}`) : ''}\n`,
        );
      }
    },
  }).finally(() => (progress as RolloutProgress | null)?.stop());
  if (opts.json) printJson(jsonSummary(summary));
  else process.stdout.write(`${summaryText(summary, run.dbPath)}\n`);
  process.exitCode = rolloutExitCode(summary);
  return summary;
}

/** A description of the mock's scripted solutions, for the demo's first line. */
type MockServerTasks = string;
