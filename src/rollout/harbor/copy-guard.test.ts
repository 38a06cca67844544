import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readHarborTasks } from './load.js';
import { buildStartingState } from './trial.js';
import { removeTree } from '../../../test/support/remove-tree.js';

/**
 * The host environment's COPY against a task folder whose environment/ holds symlinks: a host file
 * outside the task (standing for the operator's secrets) must never end up in the workspace, and
 * no copy may write through a link onto the host.
 */
let root: string;
let host: string;
const SECRET = 'operator secret\n';

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-copy-guard-'));
  host = path.join(root, 'host');
  fs.mkdirSync(path.join(host, 'dir'), { recursive: true });
  fs.writeFileSync(path.join(host, 'secret.txt'), SECRET);
  fs.writeFileSync(path.join(host, 'dir', 'secret.txt'), SECRET);
});
afterEach(() => {
  removeTree(root);
});

/** A task under root/tasks/<name>; `links` are [path in environment/, target as written]. */
function task(name: string, dockerfile: string, files: Record<string, string>, links: [string, string][] = []): string {
  const dir = path.join(root, 'tasks', name);
  const all = { 'task.toml': 'version = "1.0"\n', 'instruction.md': 'x', 'tests/test.sh': '', 'environment/Dockerfile': dockerfile, ...files };
  for (const [f, text] of Object.entries(all)) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.writeFileSync(path.join(dir, f), text);
  }
  for (const [at, target] of links) {
    fs.mkdirSync(path.dirname(path.join(dir, 'environment', at)), { recursive: true });
    fs.symlinkSync(target, path.join(dir, 'environment', at));
  }
  return dir;
}

function loadError(dir: string): string {
  try {
    readHarborTasks(dir);
  } catch (err) {
    return String(err);
  }
  return '(loaded)';
}

/** Every regular file's text under `dir`, links followed the way a host process would. */
function texts(dir: string): string[] {
  const out: string[] = [];
  for (const rel of fs.readdirSync(dir, { recursive: true }).map(String)) {
    try {
      const p = path.join(dir, rel);
      if (fs.statSync(p).isFile()) out.push(fs.readFileSync(p, 'utf8'));
    } catch {
      // a dangling link holds nothing
    }
  }
  return out;
}

describe('host-mode COPY and symlinks in environment/', () => {
  it('refuses at load a COPY source that is, or goes through, a symlink to outside environment/', () => {
    const cases: [string, string, [string, string][], RegExp][] = [
      [
        'file-link',
        'FROM a\nWORKDIR /app\nCOPY secret.txt /app/\n',
        [['secret.txt', path.join(host, 'secret.txt')]],
        /line 3.*secret\.txt resolves outside environment\//,
      ],
      ['dir-link', 'FROM a\nWORKDIR /app\nCOPY data ./data\n', [['data', path.join(host, 'dir')]], /line 3.*data resolves outside environment\//],
      [
        'through',
        'FROM a\nWORKDIR /app\nCOPY data/secret.txt .\n',
        [['data', path.join(host, 'dir')]],
        /line 3.*data\/secret\.txt resolves outside environment\//,
      ],
      ['glob', 'FROM a\nWORKDIR /app\nCOPY *.txt ./\n', [['a.txt', '../../../host/secret.txt']], /line 3.*a\.txt resolves outside environment\//],
    ];
    for (const [name, dockerfile, links, want] of cases) {
      const err = loadError(task(name, dockerfile, { 'environment/keep.txt': 'ok' }, links));
      expect(err, name).toMatch(want);
      expect(err, name).not.toContain(SECRET.trim());
    }
  });

  it('refuses at load an environment/ that is itself a link out of the task folder', () => {
    const dir = task('env-link', 'FROM a\n', {});
    fs.writeFileSync(path.join(host, 'Dockerfile'), 'FROM a\nWORKDIR /app\nCOPY . .\n');
    fs.rmSync(path.join(dir, 'environment'), { recursive: true });
    fs.symlinkSync(host, path.join(dir, 'environment'));
    expect(loadError(dir)).toMatch(/env-link\/environment: resolves outside the task folder/);
  });

  it('refuses at load a link inside a copied folder that points outside environment/ (absolute, or climbing out)', () => {
    const dir = task('inner', 'FROM a\nWORKDIR /app\nCOPY app/ /app/\n', { 'environment/app/main.py': 'print(1)\n' }, [
      ['app/abs', path.join(host, 'secret.txt')],
      ['app/sub/up', '../../../../../host/secret.txt'],
      ['app/hostdir', '../../../../host/dir'],
    ]);
    const err = loadError(dir);
    expect(err).toMatch(/app\/abs is a symlink to the absolute path .*host\/secret\.txt/);
    expect(err).toMatch(/app\/sub\/up is a symlink to \.\.\/\.\.\/\.\.\/\.\.\/\.\.\/host\/secret\.txt, outside environment\//);
    expect(err).toMatch(/app\/hostdir is a symlink to .*, outside environment\//);
  });

  it('a link .dockerignore leaves out is not copied, so not refused; links that stay inside are copied as links', async () => {
    const dir = task(
      'inside',
      'FROM a\nWORKDIR /app\nCOPY . .\n',
      { 'environment/.dockerignore': 'stray\n', 'environment/node_modules/pkg/bin.js': 'tool\n', 'environment/README': 'r' },
      [
        ['node_modules/.bin/tool', '../pkg/bin.js'],
        ['stray', path.join(host, 'secret.txt')],
      ],
    );
    const [t] = readHarborTasks(dir);
    const ws = path.join(root, 'ws');
    await buildStartingState(t!.harbor!, ws);
    expect(fs.readlinkSync(path.join(ws, 'node_modules/.bin/tool'))).toBe('../pkg/bin.js');
    expect(fs.readFileSync(path.join(ws, 'node_modules/.bin/tool'), 'utf8')).toBe('tool\n');
    expect(fs.existsSync(path.join(ws, 'stray'))).toBe(false);
  });

  it('refuses at copy time what was put there after load: a source turned into a link, a link to outside in a copied folder', async () => {
    const a = task('later-source', 'FROM a\nWORKDIR /app\nCOPY data.txt .\n', { 'environment/data.txt': 'fine\n' });
    const b = task('later-inner', 'FROM a\nWORKDIR /app\nCOPY app/ /app/\n', { 'environment/app/main.py': 'print(1)\n' });
    const [ta] = readHarborTasks(a);
    const [tb] = readHarborTasks(b);
    fs.rmSync(path.join(a, 'environment', 'data.txt'));
    fs.symlinkSync(path.join(host, 'secret.txt'), path.join(a, 'environment', 'data.txt'));
    fs.symlinkSync(path.join(host, 'dir'), path.join(b, 'environment', 'app', 'leak'));
    const wa = path.join(root, 'wa');
    const wb = path.join(root, 'wb');
    await expect(buildStartingState(ta!.harbor!, wa)).rejects.toThrow(/data\.txt resolves outside environment\//);
    await expect(buildStartingState(tb!.harbor!, wb)).rejects.toThrow(/app\/leak is a symlink to the absolute path/);
    for (const ws of [wa, wb]) expect(texts(ws)).not.toContain(SECRET);
  });

  it('never writes through a link an earlier COPY left in the workspace', async () => {
    // app/d -> ../data stays inside environment/ where it sits; copied into the workspace it points
    // beside the workspace, where a later COPY into /app/d/ would write on the host.
    const dir = task(
      'write-through',
      'FROM a\nWORKDIR /app\nCOPY app/ /app/\nCOPY payload.txt /app/d/\n',
      { 'environment/data/x': '', 'environment/payload.txt': 'planted\n' },
      [['app/d', '../data']],
    );
    const [t] = readHarborTasks(dir);
    const beside = path.join(root, 'data');
    fs.mkdirSync(beside);
    await expect(buildStartingState(t!.harbor!, path.join(root, 'ws'))).rejects.toThrow(
      /would write outside the workspace: d is a link to outside the workspace/,
    );
    expect(fs.readdirSync(beside)).toEqual([]);
  });
});
