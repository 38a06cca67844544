import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/command-table.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');
const BIN = path.join(ROOT, 'bin/polar.js');
const HOOK = path.join(ROOT, 'test/support/count-modules.mjs');
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-startup-'));
});
afterAll(() => removeTree(dir));

/** Runs the built CLI and returns the modules it loaded (files, each once), its exit code and output. */
async function modulesOf(args: string[]): Promise<{ modules: string[]; code: number; stdout: string; stderr: string }> {
  const log = path.join(dir, `${args.join('_') || 'bare'}.log`);
  let code = 0;
  let stdout = '';
  let stderr = '';
  try {
    ({ stdout, stderr } = await run(process.execPath, ['--import', HOOK, BIN, ...args], { env: { ...process.env, NO_COLOR: '1', POLAR_MODULE_LOG: log } }));
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    ({ code, stdout, stderr } = e);
  }
  const lines = fs.readFileSync(log, 'utf8').split('\n').filter(Boolean);
  const modules = [...new Set(lines.map((l) => (l.startsWith('file:') ? fileURLToPath(l) : l)))];
  return { modules, code, stdout, stderr };
}

const HEAVY = ['/node_modules/ink/', '/node_modules/react/', '/node_modules/execa/', '/node_modules/@huggingface/', '/node_modules/better-sqlite3/'];

describe('CLI start-up', () => {
  it(
    '--version, --help and bare polar load under 100 modules and no command module',
    async () => {
      for (const args of [['--version'], ['--help'], [], ['help']]) {
        const { modules, stdout, stderr } = await modulesOf(args);
        // The counter sees the CLI's own files: a broken hook would pass any bound.
        expect(
          modules.some((m) => m.endsWith(path.join('dist', 'cli', 'index.js'))),
          args.join(' '),
        ).toBe(true);
        expect(modules.length, `${args.join(' ')}: ${modules.length} modules`).toBeLessThan(100);
        expect(
          modules.filter((m) => HEAVY.some((h) => m.includes(h)) || m.includes(`${path.sep}cli${path.sep}commands${path.sep}`)),
          args.join(' '),
        ).toEqual([]);
        if (args[0] !== '--version') for (const { name } of COMMANDS) expect(stdout + stderr, name).toContain(`\n  ${name} `);
      }
    },
    patient(60_000),
  );

  it(
    'every command answers --help in full, and none loads ink for it (ink is only for the live views)',
    async () => {
      const results: Awaited<ReturnType<typeof modulesOf>>[] = [];
      // Two at a time: each is a Node process loading its command's modules on a 2-core machine.
      for (let i = 0; i < COMMANDS.length; i += 2)
        results.push(...(await Promise.all(COMMANDS.slice(i, i + 2).map(({ name }) => modulesOf([name, '--help'])))));
      COMMANDS.forEach(({ name }, i) => {
        const { code, stdout, modules } = results[i]!;
        expect(code, name).toBe(0);
        expect(stdout, name).toMatch(new RegExp(`^Usage: polar ${name} `));
        expect(stdout, name).toMatch(/-h, --help/);
        expect(
          modules.filter((m) => m.includes('/node_modules/ink/') || m.includes('/node_modules/react/')),
          name,
        ).toEqual([]);
      });
      // `polar help train` is train's own help, not the stub's.
      const help = await modulesOf(['help', 'train']);
      expect(help.stdout).toMatch(/^Usage: polar train \[options\] \[command\]/);
      expect(help.stdout).toMatch(/\bgrpo\b/);
    },
    patient(180_000),
  );
});
