import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readHarborTasks } from '../harbor/load.js';
import type { RolloutTask } from '../task-file.js';
import { FORGERIES, FORGERY_NAMES, forgeriesFor } from './index.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const FIXTURES = path.resolve(__dirname, '../../../fixtures/harbor');
const tasks = readHarborTasks(FIXTURES);
const task = (id: string) => tasks.find((t) => t.id === id)!;
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-forgeries-'));
afterAll(() => removeTree(scratch));

describe('the forgery library', () => {
  it('has the forgeries of issue 31 and the hijacks, each named once with a one-line description', () => {
    for (const name of [
      'reward-file',
      'kill-checker',
      'stdout-steal',
      'edit-tests',
      'fake-shell',
      'verify-daemon',
      'self-error',
      'git-history',
      'read-solution',
    ])
      expect(FORGERY_NAMES).toContain(name);
    for (const name of ['path-hijack', 'sitecustomize', 'conftest', 'pth', 'exit-on-load', 'shadow-module']) expect(FORGERY_NAMES).toContain(name);
    for (const [name, f] of Object.entries(FORGERIES)) {
      expect(f.name).toBe(name);
      expect(name).toMatch(/^[a-z][a-z-]*$/);
      expect(f.description).not.toContain('\n');
    }
  });

  it('writes every script as bash that parses (bash -n), on every fixture task', () => {
    for (const t of tasks)
      for (const f of Object.values(FORGERIES)) {
        const file = path.join(scratch, `${t.id}-${f.name}.sh`);
        fs.writeFileSync(file, f.script(t));
        expect(() => execFileSync('bash', ['-n', file], { stdio: 'pipe' }), `${f.name} on ${t.id}`).not.toThrow();
        expect(fs.readFileSync(file, 'utf8')).toMatch(new RegExp(`^#!/usr/bin/env bash\\n# forge:${f.name}: `));
      }
  });

  it('tries on a task only what can tell something about it', () => {
    const names = (t: RolloutTask, environment: 'host' | 'podman') => forgeriesFor(t, { environment }).map((f) => f.name);
    // No Python in a JavaScript task's workspace or verifier: no Python hijack, no pidfd trick.
    expect(names(task('js-fix-slugify'), 'host')).toEqual(expect.arrayContaining(['kill-checker', 'edit-tests', 'verify-daemon', 'self-error']));
    for (const n of ['stdout-steal', 'sitecustomize', 'pth', 'conftest']) expect(names(task('js-fix-slugify'), 'host')).not.toContain(n);
    expect(names(task('py-fix-median'), 'host')).toEqual(expect.arrayContaining(['stdout-steal', 'sitecustomize', 'pth', 'conftest', 'edit-tests']));
    // A workspace with no module to plant in (an answer file) gets no module forgery.
    expect(names(task('broken-oracle'), 'host')).toEqual(['reward-file', 'git-history', 'read-solution', 'path-hijack']);
    // The host sandbox's system folders are read-only: replacing bash is tried in a container only.
    expect(names(task('broken-oracle'), 'host')).not.toContain('fake-shell');
    expect(names(task('broken-oracle'), 'podman')).toContain('fake-shell');
    const jsonl = { ...task('broken-oracle'), harbor: undefined } as RolloutTask;
    expect(forgeriesFor(jsonl)).toEqual([]);
  });

  it('plants in modules by appending (Python, JavaScript) or after the #! line (shell), never into its own daemon', () => {
    const s = FORGERIES['verify-daemon']!.script(task('py-fix-median'));
    expect(s).toContain('"/app/.forge-daemon"');
    expect(s).toContain("workspace_files -name '*.sh'");
    // The daemon is no .sh: the loop over shell scripts must not plant a daemon into it.
    expect(s).not.toMatch(/\.forge-daemon\.sh/);
  });
});
