import type { Command } from 'commander';
import { action } from '../../output.js';
import { UPSTREAM_KINDS_HELP } from '../../upstream-options.js';
import { addRolloutFlags } from './flags.js';
import { ROLLOUT_HELP } from './help.js';
import { listRollouts } from './list.js';
import { rolloutCommand } from './run.js';
import { showRollout } from './show.js';
import { rolloutStatus } from './status.js';

/**
 * `polar rollout` (run, resume, queue), its subcommands `status` and `show`, and `polar rollouts`.
 * Each lives in its own file; the flags and what they set in the rollout's config, in flags.ts.
 */
export function registerRollout(program: Command): void {
  const rollout = program
    .command('rollout')
    .description('run tasks × N samples through a harness as rewarded GRPO groups (or resume one); `rollout show ID` for its groups');
  addRolloutFlags(rollout)
    .addHelpText('after', ROLLOUT_HELP + UPSTREAM_KINDS_HELP)
    .action(action(rolloutCommand));
  rollout
    .command('status')
    .description("a rollout's progress: samples per stage and outcome, and per worker (across machines for a queued rollout)")
    .argument('<rollout>', 'rollout id (see `polar rollouts`)')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .action(action(withParentOptions(rolloutStatus)));
  rollout
    .command('show')
    .description("one rollout's groups: each sample's outcome, reward and advantages")
    .argument('<rollout>', 'rollout id (see `polar rollouts`)')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .action(action(withParentOptions(showRollout)));
  program
    .command('rollouts')
    .description('list rollouts with their progress, mean reward and accepted samples')
    .option('--db <file|url>', 'SQLite file, or postgres://… for a shared store (default: $POLAR_DB, else ./polar.db)')
    .option('--json', 'print JSON')
    .action(action(listRollouts));
}

/**
 * `polar rollout show ID --db X`: commander hands `--db` and `--json` to `rollout` itself, which
 * has them too; the subcommand takes them from there.
 */
function withParentOptions<O extends object>(fn: (id: string, opts: O) => Promise<void>): (id: string, opts: O, cmd: Command) => Promise<void> {
  return (id, opts, cmd) => fn(id, Object.assign(opts, { ...(cmd.optsWithGlobals() as O), ...opts }));
}
