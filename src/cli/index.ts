import { Command, CommanderError, Help } from 'commander';
import { PolarError } from '../core/errors.js';
import { keepYoungGenerationSmall } from '../proxy/young-generation.js';
import { exitQuietlyOnClosedPipe } from './closed-pipe.js';
import { COMMANDS, type Register } from './command-table.js';
import { addDbPasswordOption } from './db-password.js';
import { reportError } from './output.js';
import { polarVersion } from './version.js';

/**
 * The program with the command `argv` names, loading that command's module and no other's (the
 * proxy never loads ink, execa or the trainer, and `polar --version` loads no command at all). For
 * help, or a name it does not know, every command is a stub from the table: its name and
 * description, enough for `polar --help` and for the unknown-command message. `all` loads every
 * real command (command-table.test.ts compares them with the table).
 */
export async function buildProgram(argv: readonly string[] = process.argv, { all = false }: { all?: boolean } = {}): Promise<Command> {
  const program = baseProgram(argv);
  // `polar help train` is `polar train --help`.
  const named = argv[2] === 'help' ? argv[3] : argv[2];
  const wanted = all ? COMMANDS : COMMANDS.filter(({ name }) => name === named);
  if (wanted.length === 0) addStubs(program);
  const registered = new Set<Register>();
  for (const { load } of wanted) {
    const register = await load();
    if (registered.has(register)) continue;
    registered.add(register);
    register(program);
  }
  addDbPasswordOption(program);
  return program;
}

function addStubs(program: Command): void {
  const terms = new Map(COMMANDS.map(({ name, term }) => [name, term]));
  program.configureHelp({ subcommandTerm: (command) => terms.get(command.name()) ?? new Help().subcommandTerm(command) });
  for (const { name, description } of COMMANDS) {
    // Reached only when something before the name kept it from being argv[2] (the name picks the real command).
    program
      .command(name)
      .description(description)
      .allowUnknownOption()
      .allowExcessArguments()
      .action(() => {
        reportError(new PolarError('POLAR_USAGE', `put the command first: polar ${name} [options]`), false);
      });
  }
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
  exitQuietlyOnClosedPipe();
  // Before the command's modules load: the young generation must not have grown yet.
  if (SERVES_MODEL_CALLS.has(argv[2] ?? '')) keepYoungGenerationSmall();
  const program = await buildProgram(argv);
  // Commander answers `polar <unknown> --help` with the top-level help and exit 0, because it looks
  // for help flags before it looks the command up: a typo (or a command from a newer polar) must
  // fail instead, wherever the help flag is.
  // `polar help nope` is `polar nope --help`: the same error (commander exits 1 and prints nothing).
  const viaHelp = argv[2] === 'help' && argv[3] !== undefined;
  const first = viaHelp ? argv[3] : argv[2];
  if (first !== undefined && !first.startsWith('-') && first !== 'help' && !program.commands.some((c) => c.name() === first || c.aliases().includes(first))) {
    const names = program.commands.map((c) => c.name());
    const near = names.filter((n) => n.startsWith(first.slice(0, 3)) || first.startsWith(n.slice(0, 3)));
    reportError(
      new PolarError(
        'POLAR_USAGE',
        `unknown command '${first}'${near.length > 0 ? ` (did you mean ${near.join(' or ')}?)` : ''}; commands: ${names.join(', ')}`,
      ),
      false,
    );
    return;
  }
  // The same one level down: `polar train nope --help` would print train's help and exit 0.
  const parent = program.commands.find((c) => c.name() === first);
  const second = argv[viaHelp ? 4 : 3];
  if (
    parent &&
    second !== undefined &&
    !second.startsWith('-') &&
    parent.commands.length > 0 &&
    parent.registeredArguments.length === 0 &&
    !parent.commands.some((c) => c.name() === second || c.aliases().includes(second)) &&
    second !== 'help'
  ) {
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
