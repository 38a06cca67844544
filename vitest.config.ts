import { defineConfig } from 'vitest/config';
import { patient } from './test/support/patience.js';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx', 'test/**/*.test.ts', 'test/**/*.test.tsx'],
    // Integration tests start real servers and child processes. These are safety nets, not budgets:
    // tests wait for events, and a busy machine only makes them slower (test/support/patience.ts,
    // POLAR_TEST_PATIENCE scales every net in the suite).
    testTimeout: patient(30_000),
    hookTimeout: patient(60_000),
    pool: 'forks',
    // Most test time is waiting on child processes (harness CLIs, servers), so three workers finish
    // a 2-core run in about 8 minutes where vitest's default (cores − 1 = one worker) takes about 10.
    maxWorkers: 3,
  },
});
