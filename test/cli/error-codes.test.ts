import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PolarError, type PolarErrorCode } from '../../src/core/errors.js';
import { exitCodeFor } from '../../src/cli/output.js';

const ROOT = path.resolve(__dirname, '../..');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const file = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(file);
    return /\.tsx?$/.test(e.name) && !/\.test\.tsx?$/.test(e.name) ? [file] : [];
  });
}

/** The codes src/ gives errors: the PolarErrorCode union, and any code a server or the store writes itself. */
function codesInSource(): Set<string> {
  const codes = new Set<string>();
  const errors = fs.readFileSync(path.join(ROOT, 'src/core/errors.ts'), 'utf8');
  const union = /export type PolarErrorCode =([^;]+);/.exec(errors)![1]!;
  for (const m of union.matchAll(/'(POLAR_[A-Z_]+)'/g)) codes.add(m[1]!);
  // Environment variables share the prefix (POLAR_DB, POLAR_API_KEY): only a literal in an error's place counts.
  const uses = /(?:PolarError\(|code:\s*|code === |error_code, )'(POLAR_[A-Z_]+)'/g;
  for (const file of sourceFiles(path.join(ROOT, 'src'))) for (const m of fs.readFileSync(file, 'utf8').matchAll(uses)) codes.add(m[1]!);
  return codes;
}

/** README's "Error codes" table: code → its CLI exit column. */
function readmeTable(): Map<string, string> {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Error codes\n'), readme.indexOf('\n## Development\n'));
  expect(section.length).toBeGreaterThan(100);
  const rows = new Map<string, string>();
  for (const m of section.matchAll(/^\| `(POLAR_[A-Z_]+)` \|.*\| ([^|]+) \|$/gm)) rows.set(m[1]!, m[2]!.trim());
  return rows;
}

describe('README: Error codes', () => {
  it('lists every code src/ uses, and no code src/ does not', () => {
    const source = codesInSource();
    const table = readmeTable();
    // The union alone has 19; the scan must also find the codes written outside PolarError.
    expect(source.size).toBeGreaterThanOrEqual(20);
    expect(source.has('POLAR_TOO_MANY_FAILURES')).toBe(true);
    expect([...source].filter((c) => !table.has(c)).sort()).toEqual([]);
    expect([...table.keys()].filter((c) => !source.has(c)).sort()).toEqual([]);
  });

  it("gives each thrown code the CLI's exit code", () => {
    for (const [code, exit] of readmeTable()) {
      if (exit === '–') continue;
      expect(String(exitCodeFor(new PolarError(code as PolarErrorCode, 'x'))), code).toBe(exit);
    }
  });
});
