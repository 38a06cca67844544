import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx', 'test/**/*.test.ts', 'test/**/*.test.tsx'],
    // Integration tests start real servers and child processes; two cores is the CI budget.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
