import { describe, expect, it } from 'vitest';
import { DEFAULT_BUILD_TIMEOUT_SEC, readEnvironmentTable } from './toml-fields.js';

describe('[environment].build_timeout_sec', () => {
  const read = (table: Record<string, unknown>) => {
    const problems: string[] = [];
    const fields = readEnvironmentTable(table, (file, field, what) => problems.push(`${file} ${field}: ${what}`));
    return { fields, problems };
  };

  it("is Harbor's 600 s when the task does not say (config.py:325), the task's value when it does", () => {
    expect(DEFAULT_BUILD_TIMEOUT_SEC).toBe(600);
    expect(read({}).fields.buildTimeoutSec).toBe(600);
    expect(read({ build_timeout_sec: 1800.0 }).fields.buildTimeoutSec).toBe(1800);
  });

  it('is reported with its field when it is not a positive number of seconds', () => {
    expect(read({ build_timeout_sec: 'ten minutes' }).problems).toEqual(['task.toml environment.build_timeout_sec: seconds, a positive number']);
    expect(read({ build_timeout_sec: 0 }).problems).toHaveLength(1);
  });
});
