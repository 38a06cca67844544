import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { contextGlob, dockerIgnored, ignoreProblem, readDockerignore } from './dockerignore.js';
import { readHarborTasks } from './load.js';
import { buildStartingState } from './trial.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const made: string[] = [];
afterAll(() => {
  for (const d of made) removeTree(d);
});

function folder(files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-dockerignore-'));
  made.push(root);
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.writeFileSync(path.join(root, file), text);
  }
  return root;
}

// moby's patternmatcher rules through @balena/dockerignore: cases the hand-written translator got wrong.
describe('.dockerignore as moby reads it', () => {
  it('[…] classes match one character of the class', () => {
    const patterns = ['[ab].log', 'v[0-9].txt'];
    expect(dockerIgnored('a.log', patterns)).toBe(true);
    expect(dockerIgnored('b.log', patterns)).toBe(true);
    expect(dockerIgnored('c.log', patterns)).toBe(false);
    expect(dockerIgnored('v7.txt', patterns)).toBe(true);
    expect(dockerIgnored('vx.txt', patterns)).toBe(false);
  });

  it('** spans any number of folders, none included; * and ? stay in one segment; case counts', () => {
    const patterns = ['**/*.tmp', 'a/**/b', 'x?', '*.LOG'];
    for (const rel of ['top.tmp', 'deep/er/y.tmp', 'a/b', 'a/x/y/b', 'x1']) expect(dockerIgnored(rel, patterns), rel).toBe(true);
    for (const rel of ['top.tmpx', 'a/bc', 'x12', 'sub/x1', 'app.log']) expect(dockerIgnored(rel, patterns), rel).toBe(false);
  });

  it('! re-includes a file inside a left-out folder: the folder is entered, the rest of it stays out', () => {
    const patterns = ['docs', '!docs/keep.md'];
    expect(dockerIgnored('docs/keep.md', patterns)).toBe(false);
    expect(dockerIgnored('docs/other.md', patterns)).toBe(true);
    // Walked into (a folder), though a file of that name would be left out.
    expect(dockerIgnored('docs', patterns, true)).toBe(false);
    expect(dockerIgnored('docs', patterns, false)).toBe(true);
    expect(dockerIgnored('build', ['build'], true)).toBe(true);
  });

  it("the file: # at a line's start is a comment, blank lines are nothing; a pattern that cannot compile is named", () => {
    expect(readDockerignore('\uFEFF# generated\n\n*.pyc\r\n  # not a comment\n!keep.pyc\n')).toEqual(['*.pyc', '  # not a comment', '!keep.pyc']);
    expect(ignoreProblem(['*.pyc', 'bad(']) ?? '').toMatch(/pattern 2 \("bad\("\) is not a valid pattern/);
    expect(ignoreProblem(['*.pyc'])).toBeNull();
  });

  it("COPY's wildcard sources follow the same rule ([…], ?), entries only as deep as the pattern", () => {
    const root = folder({ 'src/a.py': '', 'src/b.py': '', 'src/c.py': '', 'src/sub/a.py': '', 'x1.txt': '' });
    expect(contextGlob(root, 'src/[ab].py').map((p) => path.relative(root, p))).toEqual(['src/a.py', 'src/b.py']);
    expect(contextGlob(root, './x?.txt').map((p) => path.relative(root, p))).toEqual(['x1.txt']);
    expect(contextGlob(root, 'src/*').map((p) => path.relative(root, p))).toEqual(['src/a.py', 'src/b.py', 'src/c.py', 'src/sub']);
  });

  it("a task's COPY . brings a re-included file out of a left-out folder, and COPY src/[ab].py copies what it names", async () => {
    const root = folder({
      't/task.toml': 'version = "1.0"\n',
      't/instruction.md': 'x',
      't/tests/test.sh': '',
      't/environment/Dockerfile': 'FROM a\nWORKDIR /app\nCOPY . .\nCOPY src/[ab].py ./picked/\n',
      't/environment/.dockerignore': 'docs\n!docs/keep.md\n[ab].log\n',
      't/environment/docs/keep.md': 'kept',
      't/environment/docs/drop.md': 'dropped',
      't/environment/a.log': '',
      't/environment/c.log': '',
      't/environment/src/a.py': '',
      't/environment/src/b.py': '',
      't/environment/src/c.py': '',
    });
    const [task] = readHarborTasks(path.join(root, 't'));
    const dest = path.join(root, 'ws');
    await buildStartingState(task!.harbor!, dest);
    const files = fs
      .readdirSync(dest, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => path.relative(dest, path.join(e.parentPath, e.name)))
      .sort();
    expect(files).toEqual(['.dockerignore', 'Dockerfile', 'c.log', 'docs/keep.md', 'picked/a.py', 'picked/b.py', 'src/a.py', 'src/b.py', 'src/c.py']);
  });

  it('a .dockerignore pattern that cannot compile is a problem of the task, with its file', () => {
    const root = folder({
      't/task.toml': 'version = "1.0"\n',
      't/instruction.md': 'x',
      't/tests/test.sh': '',
      't/environment/Dockerfile': 'FROM a\nWORKDIR /app\n',
      't/environment/.dockerignore': 'ok\nbad(\n',
    });
    expect(() => readHarborTasks(path.join(root, 't'))).toThrow(/environment\/\.dockerignore: pattern 2 \("bad\("\) is not a valid pattern/);
  });
});
