import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from './command-table.js';
import { buildProgram } from './index.js';
import { patient } from '../../test/support/patience.js';

describe('the command table', () => {
  it(
    'names, terms and descriptions match the real commands, in help order',
    async () => {
      const real = await buildProgram(['node', 'polar'], { all: true });
      const help = real.createHelp();
      const actual = real.commands.map((c) => ({ name: c.name(), term: help.subcommandTerm(c), description: help.subcommandDescription(c) }));
      expect(COMMANDS.map(({ name, term, description }) => ({ name, term, description }))).toEqual(actual);
    },
    patient(60_000),
  );

  it(
    'top-level help from the table is the help of the real program',
    async () => {
      const [stubbed, real] = await Promise.all([buildProgram(['node', 'polar', '--help']), buildProgram(['node', 'polar'], { all: true })]);
      expect(stubbed.helpInformation()).toBe(real.helpInformation());
    },
    patient(60_000),
  );

  it('every command module is in the table (a command left out would be unreachable)', () => {
    const dir = path.join(__dirname, 'commands');
    const table = fs.readFileSync(path.join(__dirname, 'command-table.ts'), 'utf8');
    // A command is a file in commands/ or a folder with its index.ts (commands/rollout/).
    const files = fs
      .readdirSync(dir, { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? (fs.existsSync(path.join(dir, e.name, 'index.ts')) ? [`${e.name}/index.ts`] : []) : [e.name]));
    const modules = files.filter((f) => f.endsWith('.ts') && /export function register[A-Z]/.test(fs.readFileSync(path.join(dir, f), 'utf8')));
    expect(modules).toContain('rollout/index.ts');
    expect(modules.length).toBeGreaterThan(10);
    for (const file of modules) expect(table, file).toContain(`import('./commands/${file.replace(/\.ts$/, '.js')}')`);
  });
});
