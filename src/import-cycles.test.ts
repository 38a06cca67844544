import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * No import circles in src/: a module that imports, even for a type, the module that imports it
 * cannot be read, moved or tested alone, and a value circle can hand one side an unfinished module
 * at load time. Every import TypeScript sees counts (type-only, re-exports and `import()` too, as
 * madge counts them). Tests are left out: they may import what they like.
 *
 * A circle is broken by moving what both sides need to the module that owns it, or to a small
 * types file both import (proxy/context.ts, rollout/stage-types.ts, upstream/thinking.ts).
 */

const SRC = path.dirname(new URL(import.meta.url).pathname);

function sourceFiles(): string[] {
  return (fs.readdirSync(SRC, { recursive: true }) as string[])
    .filter((f) => /\.tsx?$/.test(f) && !/\.test\.tsx?$/.test(f) && !f.endsWith('.d.ts'))
    .map((f) => path.join(SRC, f));
}

/** The file a relative specifier names (`./x.js` is `./x.ts` in src), or null for a package or a file outside src. */
function resolve(from: string, specifier: string, known: ReadonlySet<string>): string | null {
  if (!specifier.startsWith('.')) return null;
  const base = path.resolve(path.dirname(from), specifier).replace(/\.js$/, '');
  for (const candidate of [`${base}.ts`, `${base}.tsx`, path.join(base, 'index.ts')]) if (known.has(candidate)) return candidate;
  return null;
}

function importGraph(): Map<string, string[]> {
  const files = sourceFiles();
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    const targets = importedFiles.map((i) => resolve(file, i.fileName, known)).filter((t): t is string => t !== null);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Strongly connected components of more than one module, or of one that imports itself (Tarjan). */
function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)?.includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('src imports', () => {
  it('finds a circle, type-only or through a re-export, where there is one', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
      ['e', ['e']],
    ]);
    expect(circles(graph)).toEqual([['a', 'b', 'c'], ['e']]);
    const file = "import type { A } from './a.js';\nexport { B } from './b.js';\nconst c = await import('./c.js');\n// import d from './d.js'";
    expect(ts.preProcessFile(file, true, true).importedFiles.map((i) => i.fileName)).toEqual(['./a.js', './b.js', './c.js']);
  });

  it('form no circle', () => {
    const graph = importGraph();
    expect(graph.size).toBeGreaterThan(100);
    const named = circles(graph).map((c) => c.map((f) => path.relative(SRC, f)).join(', '));
    expect(named, 'import circles in src/: move what both sides need to the module that owns it, or to a small types file').toEqual([]);
  });
});
