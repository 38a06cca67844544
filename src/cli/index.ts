import { Command, CommanderError } from 'commander';
import { PolarError } from '../core/errors.js';
import { reportError } from './output.js';
import { registerDemo } from './commands/demo.js';
import { registerExport } from './commands/export.js';
import { registerGymAgent } from './commands/gym-agent.js';
import { registerMockServer } from './commands/mock-server.js';
import { registerProxy } from './commands/proxy.js';
import { registerReconstruct } from './commands/reconstruct.js';
import { registerReplay } from './commands/replay.js';
import { registerReport } from './commands/report.js';
import { registerRollout } from './commands/rollout.js';
import { registerRun } from './commands/run.js';
import { registerVerify } from './commands/verify.js';
import { registerSessions } from './commands/sessions.js';
import { registerShow } from './commands/show.js';
import { registerTrain } from './commands/train.js';
import { polarVersion } from './version.js';

export function buildProgram(argv: readonly string[] = process.argv): Command {
  const json = argv.includes('--json');
  const program = new Command('polar')
    .description('Capture token-exact RL training data from coding-agent harnesses, at their model API boundary.')
    .version(polarVersion(), '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    // Set before the commands are added, which inherit it: usage errors come back to main() as
    // CommanderErrors instead of process.exit, and under --json they are the JSON envelope too.
    .exitOverride()
    .configureOutput({
      outputError: (text, write) => {
        if (json) process.stdout.write(`${JSON.stringify({ ok: false, error: { code: 'POLAR_USAGE', message: text.replace(/^error: /, '').trim() } })}\n`);
        else write(text);
      },
    });
  registerDemo(program);
  registerRun(program);
  registerRollout(program);
  registerProxy(program);
  registerMockServer(program);
  registerSessions(program);
  registerShow(program);
  registerReconstruct(program);
  registerVerify(program);
  registerExport(program);
  registerGymAgent(program);
  registerTrain(program);
  registerReplay(program);
  registerReport(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram(argv);
  // Commander answers `polar <unknown> --help` with the top-level help and exit 0, because it looks
  // for help flags before it looks the command up: a typo (or a command from a newer polar) must
  // fail instead, wherever the help flag is.
  const first = argv[2];
  if (first !== undefined && !first.startsWith('-') && first !== 'help' && !program.commands.some((c) => c.name() === first || c.aliases().includes(first))) {
    const names = program.commands.map((c) => c.name());
    const near = names.filter((n) => n.startsWith(first.slice(0, 3)) || first.startsWith(n.slice(0, 3)));
    reportError(new PolarError('POLAR_USAGE', `unknown command '${first}'${near.length > 0 ? ` (did you mean ${near.join(' or ')}?)` : ''}; commands: ${names.join(', ')}`), false);
    return;
  }
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    // Help and --version end with 0; every other commander error is a usage error (exit 2).
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  }
}
