import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readHarborTasks } from '../harbor/load.js';
import type { RolloutTask } from '../task-file.js';
import { readTaskFile } from '../task-file.js';
import { FORGERIES, FORGERY_NAMES, forgeriesFor } from './index.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const FIXTURES = path.resolve(__dirname, '../../../fixtures/harbor');
const tasks = readHarborTasks(FIXTURES);
const task = (id: string) => tasks.find((t) => t.id === id)!;
const jsonlTasks = readTaskFile(path.resolve(__dirname, '../../../fixtures/tasks/tasks.jsonl'));
const jsonlTask = (id: string) => jsonlTasks.find((t) => t.id === id)!;
/** The self-inflicted errors (escapes.ts): tried wherever something grades the agent's files. */
const ESCAPES = ['git-removed', 'git-corrupt', 'git-file', 'git-filter', 'fork-bomb', 'huge-file', 'memory-hog'];
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
    for (const t of [...tasks, ...jsonlTasks])
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
    expect(names(task('broken-oracle'), 'host')).toEqual(['reward-file', 'git-history', 'read-solution', 'path-hijack', ...ESCAPES]);
    // The host sandbox's system folders are read-only: replacing bash is tried in a container only.
    expect(names(task('broken-oracle'), 'host')).not.toContain('fake-shell');
    expect(names(task('broken-oracle'), 'podman')).toContain('fake-shell');
    // A JSONL task that nothing grades the agent's files for: nothing to forge.
    const ungraded = { ...jsonlTask('create-greeting'), evaluator: { type: 'session-completed' } } as RolloutTask;
    expect(forgeriesFor(ungraded)).toEqual([]);
  });

  it('plants in modules by appending (Python, JavaScript) or after the #! line (shell), never into its own daemon', () => {
    const s = FORGERIES['verify-daemon']!.script(task('py-fix-median'));
    expect(s).toContain('"/app/.forge-daemon"');
    expect(s).toContain("workspace_files -name '*.sh'");
    // The daemon is no .sh: the loop over shell scripts must not plant a daemon into it.
    expect(s).not.toMatch(/\.forge-daemon\.sh/);
  });

  it('tries on a JSONL task what its evaluator runs: Python runners get the pytest and shadow forgeries, npm the scripts forgery', () => {
    const names = (t: RolloutTask) => forgeriesFor(t, { environment: 'host' }).map((f) => f.name);
    const withEvaluator = (evaluator: RolloutTask['evaluator'], dir = 'py-fizzbuzz') => ({ ...jsonlTask(dir), evaluator }) as RolloutTask;
    const pytest = names(withEvaluator({ type: 'tests', fail_to_pass: ['python3 -m pytest -q test_fizzbuzz.py'], pass_to_pass: [], timeout: 60 }));
    expect(pytest).toEqual(expect.arrayContaining(['pytest-config', 'pytest-plugin', 'conftest', 'shadow-module', 'exit-on-load', ...ESCAPES]));
    // A named runner (tests.ts) is what the evaluator runs, although its ids are no commands.
    const named = names(
      withEvaluator({ type: 'tests', runner: 'pytest', fail_to_pass: ['test_fizzbuzz.py::test_x'], pass_to_pass: [], timeout: 60 } as RolloutTask['evaluator']),
    );
    expect(named).toEqual(expect.arrayContaining(['pytest-config', 'pytest-plugin']));
    const unittest = names(withEvaluator({ type: 'tests', fail_to_pass: ['python3 -m unittest -q test_fizzbuzz'], pass_to_pass: [], timeout: 60 }));
    expect(unittest).toEqual(expect.arrayContaining(['shadow-module', 'sitecustomize', 'pth']));
    for (const n of ['pytest-config', 'pytest-plugin', 'npm-scripts', 'reward-huge', 'reward-beside', 'reward-file', 'verify-daemon', 'fake-shell'])
      expect(unittest, n).not.toContain(n);
    // npm test decides by package.json: the scripts forgery; no Python hijack on a JavaScript workspace.
    const npm = names(withEvaluator({ type: 'command', command: 'npm test', timeout: 60 }, 'js-sum'));
    expect(npm).toEqual(expect.arrayContaining(['npm-scripts', 'exit-on-load', 'reward-huge', 'edit-tests', ...ESCAPES]));
    for (const n of ['pytest-config', 'shadow-module', 'sitecustomize', 'stdout-steal']) expect(npm, n).not.toContain(n);
    // A hidden checker run with node, on a workspace with a package.json: the scripts forgery too; the printed reward only where the output is the grade.
    expect(names(jsonlTask('js-slugify'))).toEqual(expect.arrayContaining(['npm-scripts', 'reward-huge', 'kill-checker']));
    expect(names(jsonlTask('js-sum'))).not.toContain('reward-huge');
    // Harbor's reward files: reward-beside on a Harbor task whose verifier loads modules, never on a JSONL one.
    expect(forgeriesFor(task('py-fix-median')).map((f) => f.name)).toContain('reward-beside');
    // A git source may hold later commits; a folder's workspace starts from a fresh repository.
    expect(names(jsonlTask('py-stats-empty'))).toContain('git-history');
    expect(names(jsonlTask('py-fizzbuzz'))).not.toContain('git-history');
  });

  it('configures every pytest config file and spells TOML values quoted', () => {
    const dir = fs.mkdtempSync(path.join(scratch, 'pytest-config-'));
    fs.writeFileSync(path.join(dir, 'pyproject.toml'), '[project]\nname = "x"\n\n[tool.pytest.ini_options]\nminversion = "6.0"\n');
    execFileSync('bash', ['-c', FORGERIES['pytest-plugin']!.script(jsonlTask('py-fizzbuzz'))], { cwd: dir, stdio: 'pipe' });
    expect(fs.readFileSync(path.join(dir, 'pytest.ini'), 'utf8')).toBe('[pytest]\npythonpath = .\naddopts = -p forgeplug\n');
    expect(fs.readFileSync(path.join(dir, 'pyproject.toml'), 'utf8')).toContain(
      '[tool.pytest.ini_options]\npythonpath = "."\naddopts = "-p forgeplug"\nminversion',
    );
    expect(fs.readFileSync(path.join(dir, 'setup.cfg'), 'utf8')).toContain('[tool:pytest]\npythonpath = .\naddopts = -p forgeplug');
    expect(fs.readFileSync(path.join(dir, 'tox.ini'), 'utf8')).toContain('[pytest]\npythonpath = .');
    expect(fs.existsSync(path.join(dir, 'forgeplug.py'))).toBe(true);
  });
});
