import { Command } from 'commander';
import { registerProxy } from './commands/proxy.js';
import { registerSessions } from './commands/sessions.js';
import { registerShow } from './commands/show.js';
import { polarVersion } from './version.js';

export function buildProgram(): Command {
  const program = new Command('polar')
    .description('Capture token-exact RL training data from coding-agent harnesses, at their model API boundary.')
    .version(polarVersion(), '-V, --version')
    .showHelpAfterError('(run with --help for usage)');
  registerProxy(program);
  registerSessions(program);
  registerShow(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  await buildProgram().parseAsync(argv);
}
