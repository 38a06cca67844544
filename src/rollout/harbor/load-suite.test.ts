import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadTasks } from '../load-tasks.js';
import { readHarborSuite } from './load.js';
import { removeTree } from '../../../test/support/remove-tree.js';

const roots: string[] = [];
function dataset(tasks: Record<string, Record<string, string>>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-suite-'));
  roots.push(root);
  for (const [name, files] of Object.entries(tasks))
    for (const [file, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, name, file)), { recursive: true });
      fs.writeFileSync(path.join(root, name, file), text);
    }
  return root;
}
afterEach(() => {
  for (const r of roots.splice(0)) removeTree(r);
});

const task = (toml: string) => ({
  'task.toml': toml,
  'instruction.md': 'do it',
  'environment/Dockerfile': 'FROM debian:12-slim\nWORKDIR /app\n',
  'tests/test.sh': 'echo 1 > /logs/verifier/reward.txt\n',
});

describe('a Harbor suite is loaded task by task', () => {
  it("an invalid task is set apart with its reasons (Harbor's rule cited); the rest load", () => {
    const root = dataset({
      good: task('schema_version = "1.1"\n[task]\nname = "org/good"\n'),
      'no-org': task('schema_version = "1.1"\n[task]\nname = "no-org"\n'),
      dots: task('schema_version = "1.1"\n[task]\nname = "org/a..b"\n'),
      'two-problems': { ...task('version = "1.0"\n[verifier]\ntimeout_sec = -1\n'), 'instruction.md': '' },
    });
    const suite = readHarborSuite(root);
    expect(suite.single).toBe(false);
    expect(suite.tasks.map((t) => t.id)).toEqual(['good']);
    expect(suite.invalid.map((t) => t.id)).toEqual(['dots', 'no-org', 'two-problems']);
    const why = Object.fromEntries(suite.invalid.map((t) => [t.id, t.problems]));
    expect(why['no-org']).toEqual([
      expect.stringMatching(
        /no-org\/task\.toml, field "task\.name": "no-org" is not "org\/name": Harbor's own validator rejects it too .*models\/task\/config\.py:216-224/,
      ),
    ]);
    // Harbor also refuses ".." (config.py:220), which its pattern alone would let through.
    expect(why.dots![0]).toMatch(/"org\/a\.\.b" is not "org\/name"/);
    expect(why['two-problems']).toEqual([
      expect.stringMatching(/two-problems\/instruction\.md: empty/),
      expect.stringMatching(/two-problems\/task\.toml, field "verifier\.timeout_sec": seconds/),
    ]);
  });

  it('--tasks DIR runs the valid tasks and says each one it skipped; refuses only when none is valid, or when DIR is one invalid task', () => {
    const root = dataset({ good: task('version = "1.0"\n'), bad: task('schema_version = "1.1"\n[task]\nname = "bad"\n') });
    const notices: string[] = [];
    expect(loadTasks(root, (l) => notices.push(l)).map((t) => t.id)).toEqual(['good']);
    expect(notices).toEqual([expect.stringMatching(/^notice: task bad skipped \(invalid\): .*task\.name.*not "org\/name"/)]);
    const none = dataset({ bad: task('schema_version = "1.1"\n[task]\nname = "bad"\n') });
    expect(() => loadTasks(none, () => {})).toThrow(/none of the 1 Harbor tasks in .* is valid: they have 1 problem; nothing was started:\n {2}.*task\.name/);
    expect(() => loadTasks(path.join(root, 'bad'), () => {})).toThrow(/the Harbor task has 1 problem; nothing was started/);
    expect(loadTasks(path.join(root, 'good'), () => {}).map((t) => t.id)).toEqual(['good']);
  });
});
