import { Command, CommanderError } from 'commander';
import { PolarError } from '../core/errors.js';
import { keepYoungGenerationSmall } from '../proxy/young-generation.js';
import { addDbPasswordOption } from './db-password.js';
import { reportError } from './output.js';
import { polarVersion } from './version.js';

type Register = (program: Command) => void;

/**
 * The commands, in help order, each loaded only when it is needed: a command run loads its own
 * modules and no other's (the proxy never loads ink, execa or the trainer), which keeps each
 * process's memory to what it uses. Help and unknown commands load them all.
 */
const COMMANDS: readonly [string, () => Promise<Register>][] = [
  ['demo', async () => (await import('./commands/demo.js')).registerDemo],
  ['run', async () => (await import('./commands/run.js')).registerRun],
  ['rollout', async () => (await import('./commands/rollout.js')).registerRollout],
  ['rollouts', async () => (await import('./commands/rollout.js')).registerRollout],
  ['proxy', async () => (await import('./commands/proxy.js')).registerProxy],
  ['mock-server', async () => (await import('./commands/mock-server.js')).registerMockServer],
  ['sessions', async () => (await import('./commands/sessions.js')).registerSessions],
  ['audit', async () => (await import('./commands/audit.js')).registerAudit],
  ['show', async () => (await import('./commands/show.js')).registerShow],
  ['reconstruct', async () => (await import('./commands/reconstruct.js')).registerReconstruct],
  ['verify-faithfulness', async () => (await import('./commands/verify.js')).registerVerify],
  ['export', async () => (await import('./commands/export.js')).registerExport],
  ['gym-agent', async () => (await import('./commands/gym-agent.js')).registerGymAgent],
  ['train', async () => (await import('./commands/train.js')).registerTrain],
  ['replay', async () => (await import('./commands/replay.js')).registerReplay],
  ['report', async () => (await import('./commands/report.js')).registerReport],
  ['db', async () => (await import('./commands/db.js')).registerDb],
  ['worker', async () => (await import('./commands/worker.js')).registerWorker],
];

/** The program with the command `argv` names, or with all of them (for help, or a name it does not know). */
export async function buildProgram(argv: readonly string[] = process.argv): Promise<Command> {
  const program = baseProgram(argv);
  const first = argv[2];
  const wanted = COMMANDS.filter(([name]) => name === first);
  const registered = new Set<Register>();
  for (const [, load] of wanted.length > 0 ? wanted : COMMANDS) {
    const register = await load();
    if (registered.has(register)) continue;
    registered.add(register);
    register(program);
  }
  addDbPasswordOption(program);
  return program;
}

function baseProgram(argv: readonly string[]): Command {
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
  return program;
}

/** The commands whose process serves model calls (a proxy, in process): see young-generation.ts. */
const SERVES_MODEL_CALLS = new Set(['demo', 'run', 'rollout', 'rollouts', 'proxy', 'gym-agent', 'train', 'replay', 'worker']);

export async function main(argv: string[]): Promise<void> {
  // Before the command's modules load: the young generation must not have grown yet.
  if (SERVES_MODEL_CALLS.has(argv[2] ?? '')) keepYoungGenerationSmall();
  const program = await buildProgram(argv);
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
  // The same one level down: `polar train nope --help` would print train's help and exit 0.
  const parent = program.commands.find((c) => c.name() === first);
  const second = argv[3];
  if (parent && second !== undefined && !second.startsWith('-') && parent.commands.length > 0 && parent.registeredArguments.length === 0 && !parent.commands.some((c) => c.name() === second || c.aliases().includes(second)) && second !== 'help') {
    reportError(new PolarError('POLAR_USAGE', `unknown command '${first} ${second}'; ${first} has: ${parent.commands.map((c) => c.name()).join(', ')}`), false);
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
