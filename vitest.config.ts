import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx', 'test/**/*.test.ts', 'test/**/*.test.tsx'],
    // Integration tests start real servers and child processes; two cores is the CI budget.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Most test time is waiting on child processes (harness CLIs, servers), so three workers finish
    // a 2-core run in about 8 minutes where vitest's default (cores − 1 = one worker) takes about 10.
    maxWorkers: 3,
  },
});
