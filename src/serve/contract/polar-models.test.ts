import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sessionResultProblems, taskRequestProblems, taskResultProblems, taskStatusProblems, traceProblems, trajectoryProblems } from './polar-models.js';

/**
 * polar-models.ts against Polar's own pydantic models: each document in the fixture was run through
 * them (scripts/check-polar-models.py on the pinned model files) and its verdict recorded. The
 * TypeScript re-statement must accept exactly what pydantic accepted and reject what it rejected.
 */
const FIXTURE = path.resolve(__dirname, '../../../fixtures/polar-api/pydantic-verdicts.json');
const { cases } = JSON.parse(fs.readFileSync(FIXTURE, 'utf8')) as { cases: { model: string; data: unknown; pydantic_problems: string[] }[] };
const CHECKS: Record<string, (x: unknown) => string[]> = {
  Trace: traceProblems,
  Trajectory: trajectoryProblems,
  SessionResult: (x) => sessionResultProblems(x),
  TaskResult: (x) => taskResultProblems(x),
  TaskStatus: (x) => taskStatusProblems(x),
  TaskRequest: taskRequestProblems,
};

describe("polar-models.ts agrees with Polar's pydantic models", () => {
  it('covers accepted and rejected documents of every wire model', () => {
    expect(new Set(cases.map((c) => c.model))).toEqual(new Set(Object.keys(CHECKS)));
    expect(cases.filter((c) => c.pydantic_problems.length === 0).length).toBeGreaterThan(20);
    expect(cases.filter((c) => c.pydantic_problems.length > 0).length).toBeGreaterThan(50);
  });
  it.each(cases.map((c, i) => ({ ...c, i })))('case $i ($model): the same verdict', ({ model, data, pydantic_problems }) => {
    const ours = CHECKS[model]!(data);
    expect(ours.length === 0, `pydantic: ${JSON.stringify(pydantic_problems)}; ours: ${JSON.stringify(ours)}`).toBe(pydantic_problems.length === 0);
  });
});
