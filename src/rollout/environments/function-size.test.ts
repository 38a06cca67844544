import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * No function of an environment or a box provider runs over 80 lines: each is one named step a
 * reader can hold (issue 41: the container environment had been one 230-line closure, the host's a
 * 118-line one, and adding an environment meant editing inside them). Arrow functions and methods
 * count as functions; a function's lines are its own, from its first line to its last.
 */
const MAX_LINES = 80;
const ROLLOUT = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const FOLDERS = ['environments', 'boxes'];

function sources(): string[] {
  return FOLDERS.flatMap((f) =>
    (fs.readdirSync(path.join(ROLLOUT, f), { recursive: true }) as string[])
      .filter((n) => n.endsWith('.ts') && !n.endsWith('.test.ts') && !n.endsWith('.cases.ts'))
      .map((n) => path.join(ROLLOUT, f, n)),
  );
}

/** Every function in a file longer than `max` lines, as `file:line name (N lines)`. */
function longFunctions(file: string, max: number): string[] {
  const text = fs.readFileSync(file, 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      const name = node.name && ts.isIdentifier(node.name) ? node.name.text : '(anonymous)';
      if (lines > max) out.push(`${path.relative(ROLLOUT, file)}:${first + 1} ${name} (${lines} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

describe('environment and box-provider functions', () => {
  it(`none is over ${MAX_LINES} lines`, () => {
    expect(sources().flatMap((f) => longFunctions(f, MAX_LINES))).toEqual([]);
  });

  it('the measure sees a long function (it is not vacuous)', () => {
    const box = path.join(ROLLOUT, 'environments', 'box', 'index.ts');
    // boxEnvironment's returned closure is over 20 lines: a lower bar must name it.
    expect(longFunctions(box, 20).some((l) => l.includes('boxEnvironment'))).toBe(true);
  });
});
