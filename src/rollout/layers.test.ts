import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * rollout/'s layers, lowest first: each module may import its own layer and those below it, never
 * one above (every import TypeScript sees, type-only too, as import-cycles.test.ts counts them).
 * The box providers know nothing of tasks; the task format knows no environment; environments
 * know no evaluator; the stages run what is below them; rollouts and task checking drive the stages.
 * A new module must be placed here: one no layer names fails the test, so the order is decided
 * when the module is written, not found out later.
 */
const LAYERS: readonly { name: string; holds: readonly string[] }[] = [
  { name: 'box providers', holds: ['boxes/', 'stage-error.ts'] },
  {
    name: 'task format',
    holds: ['harbor/', 'task-file.ts', 'git-source.ts', 'load-tasks.ts', 'reward.ts', 'first-prompts.ts', 'group-first-prompts.ts', 'sample-mask.ts'],
  },
  { name: 'settings and sample places', holds: ['config.ts', 'workspace.ts', 'sandboxing.ts', 'environments/'] },
  { name: 'agents and judges', holds: ['evaluators/', 'reward-range.ts', 'agents/', 'forgeries/'] },
  { name: 'stages', holds: ['stages.ts', 'step-stages.ts', 'stage-types.ts', 'multi-step.ts', 'accept.ts', 'ledger.ts', 'stats.ts'] },
  {
    name: 'rollouts and task checking',
    holds: ['run-rollout.ts', 'resume-config.ts', 'channel.ts', 'out-dir.ts', 'queue/', 'checking/'],
  },
];

const ROLLOUT = path.dirname(new URL(import.meta.url).pathname);

function layerOf(rel: string): number {
  return LAYERS.findIndex((l) => l.holds.some((h) => (h.endsWith('/') ? rel.startsWith(h) : rel === h)));
}

function modules(): string[] {
  return (fs.readdirSync(ROLLOUT, { recursive: true }) as string[])
    .filter((f) => /\.tsx?$/.test(f) && !/\.test\.tsx?$/.test(f) && !/\.cases\.tsx?$/.test(f))
    .map((f) => f.split(path.sep).join('/'))
    .sort();
}

/** Each import of `rel` that lands inside rollout/, as a rollout-relative path. */
function importsOf(rel: string, known: ReadonlySet<string>): string[] {
  const file = path.join(ROLLOUT, rel);
  const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
  const out: string[] = [];
  for (const i of importedFiles) {
    if (!i.fileName.startsWith('.')) continue;
    const base = path.relative(ROLLOUT, path.resolve(path.dirname(file), i.fileName)).replace(/\.js$/, '');
    const hit = [`${base}.ts`, `${base}.tsx`, `${base}/index.ts`].find((c) => known.has(c));
    if (hit) out.push(hit);
  }
  return out;
}

describe("rollout/'s layers", () => {
  it('every module has a layer', () => {
    expect(modules().filter((m) => layerOf(m) < 0)).toEqual([]);
  });

  it('no import runs from a lower layer to a higher one', () => {
    const all = modules();
    const known = new Set(all);
    const upward: string[] = [];
    for (const m of all) {
      for (const target of importsOf(m, known)) {
        if (layerOf(target) > layerOf(m)) upward.push(`${m} (${LAYERS[layerOf(m)]!.name}) imports ${target} (${LAYERS[layerOf(target)]!.name})`);
      }
    }
    expect(upward).toEqual([]);
  });

  it('sees an upward import when there is one (the check is not empty)', () => {
    const known = new Set(modules());
    // stages.ts runs environments: it imports a lower layer, so the reverse would be upward.
    expect(importsOf('stages.ts', known).some((t) => layerOf(t) < layerOf('stages.ts'))).toBe(true);
  });
});
