import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Issue 40, item 5: what a new user copies from the README. The headline `polar run` wrote into
 * whatever folder the user stood in (the checkout); an install where only the npm registry is
 * reachable failed in better-sqlite3's build with no word on `nodedir`.
 */
const README = fs.readFileSync(path.resolve(__dirname, '../../README.md'), 'utf8');
/** The shell lines of the README's code blocks. */
const shellLines = [...README.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n'));

describe('README: the first hour', () => {
  it('every `polar run` with a prompt names the folder the agent works in (--cwd)', () => {
    const runs = shellLines.filter((l) => /^npx polar run .*--prompt/.test(l));
    expect(runs.length).toBeGreaterThanOrEqual(2);
    for (const line of runs) expect(line, line).toMatch(/ --cwd \S+/);
  });

  it('gives the install line for a network that reaches only the npm registry, and the folders the install writes into the home', () => {
    expect(shellLines.some((l) => /^npm install --nodedir=/.test(l))).toBe(true);
    for (const dir of ['~/.cache/opencode', '~/.config/opencode', '~/.local/share/opencode', '~/.local/state/opencode']) expect(README).toContain(`\`${dir}\``);
    expect(README).toMatch(/cookie@2\.0\.2/);
    expect(README).toMatch(/install scripts not yet covered by allowScripts/);
  });
});
