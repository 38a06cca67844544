import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runShell } from '../../src/core/process/shell.js';
import { DEFAULT_LIMITS, findBwrap, openJail, sandboxInsidePaths, type SandboxSettings } from '../../src/sandbox/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Two samples' sandboxes under real bubblewrap, as a rollout opens them: each sample's workspace and
 * private home are its own host folders, but the command sees both at the same fixed paths, with the
 * same hostname, and nothing of the host paths. What it writes lands in its own sample's folders.
 */
const bwrap = findBwrap();

describe.skipIf(!bwrap)('fixed workspace and home paths in bubblewrap (skipped: bubblewrap is not installed)', () => {
  let root: string;
  const settings = (): SandboxSettings => ({ kind: 'bwrap', bwrap: bwrap!, network: 'host', limits: DEFAULT_LIMITS, extraReadOnly: [] });
  const fixed = sandboxInsidePaths();

  beforeAll(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-fixed-paths-'));
  });
  afterAll(() => removeTree(root));

  async function sample(i: number): Promise<{ out: string; ws: string; home: string }> {
    const ws = path.join(root, 'workspaces', `t-${i}-a1`);
    const home = path.join(root, '.polar', 'runs', `ses_${i}`, 'home');
    fs.mkdirSync(ws, { recursive: true });
    fs.writeFileSync(path.join(ws, 'README.md'), '# task\n');
    const jail = await openJail(settings(), { cwd: ws, home, homeInside: fixed.home, cwdInside: fixed.workspace, network: 'host' });
    expect(jail.home).toBe(fixed.home);
    const r = await runShell('pwd; echo "$HOME"; hostname; ls -A; echo sample > "$HOME/mark"; echo edit >> README.md; ls -A "$HOME"', {
      cwd: ws,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      timeoutMs: patient(20_000),
      wrap: (c) => jail.wrap(c),
    });
    await jail.close({ exitCode: r.exitCode, signal: r.signal });
    expect(r.exitCode, r.stderr).toBe(0);
    return { out: r.stdout, ws, home };
  }

  it('show every sample the same working directory, home and hostname, and write to its own folders', async () => {
    const [a, b] = [await sample(0), await sample(1)];
    expect(a.out).toBe(b.out);
    expect(a.out.split('\n').slice(0, 3)).toEqual([fixed.workspace, fixed.home, 'polar-sandbox']);
    expect(a.out).not.toContain(root);
    for (const s of [a, b]) {
      expect(fs.readFileSync(path.join(s.home, 'mark'), 'utf8')).toBe('sample\n');
      expect(fs.readFileSync(path.join(s.ws, 'README.md'), 'utf8')).toBe('# task\nedit\n');
    }
  });
});
