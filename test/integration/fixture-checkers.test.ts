import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { removeTree } from '../support/remove-tree.js';

/**
 * The fixture's hidden checker scores the agent's code; under RL the agent writes that code to
 * raise its reward. A slugify.js that prints a reward and exits on load must not score itself
 * (the checker used to require() it in its own process, where that worked).
 */
const CHECKER = path.resolve(__dirname, '../../fixtures/tasks/checks/slugify-check.cjs');
let dir: string;
afterEach(() => removeTree(dir));

function score(source: string): { reward: number } {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-checker-'));
  fs.writeFileSync(path.join(dir, 'slugify.js'), source);
  const out = execFileSync(process.execPath, [CHECKER], { cwd: dir, encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').at(-1)!) as { reward: number };
}

describe('fixture checker (js-slugify)', () => {
  it('scores a correct slugify 1 and a partial one by its share of cases', () => {
    expect(score('exports.slugify = (t) => t.toLowerCase().replace(/[^a-z0-9 ]/g, "").trim().split(/ +/).join("-");').reward).toBe(1);
    expect(score('exports.slugify = (t) => t.toLowerCase();').reward).toBe(0.25);
  });

  it('gives nothing to code that prints a reward and exits on load', () => {
    expect(score('console.log(JSON.stringify({ reward: 1 })); process.exit(0);').reward).toBe(0);
    expect(score('console.log(JSON.stringify({ reward: 1 })); exports.slugify = () => "x";').reward).toBe(0);
  });
});
