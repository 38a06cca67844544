import { Command } from 'commander';
import { registerDemo } from './commands/demo.js';
import { registerExport } from './commands/export.js';
import { registerMockServer } from './commands/mock-server.js';
import { registerProxy } from './commands/proxy.js';
import { registerReconstruct } from './commands/reconstruct.js';
import { registerRun } from './commands/run.js';
import { registerVerify } from './commands/verify.js';
import { registerSessions } from './commands/sessions.js';
import { registerShow } from './commands/show.js';
import { polarVersion } from './version.js';

export function buildProgram(): Command {
  const program = new Command('polar')
    .description('Capture token-exact RL training data from coding-agent harnesses, at their model API boundary.')
    .version(polarVersion(), '-V, --version')
    .showHelpAfterError('(run with --help for usage)');
  registerDemo(program);
  registerRun(program);
  registerProxy(program);
  registerMockServer(program);
  registerSessions(program);
  registerShow(program);
  registerReconstruct(program);
  registerVerify(program);
  registerExport(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  await buildProgram().parseAsync(argv);
}
