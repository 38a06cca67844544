import { expect, it } from 'vitest';
import { exitStatus } from './command-line.js';

it('reports an exit code as is, and a signal as 128 + its number, as a shell does', () => {
  expect(exitStatus({ exitCode: 0 })).toBe(0);
  expect(exitStatus({ exitCode: 3, signal: 'SIGTERM' })).toBe(3);
  expect(exitStatus({ signal: 'SIGINT' })).toBe(130);
  expect(exitStatus({ signal: 'SIGKILL' })).toBe(137);
  expect(exitStatus({ signal: 'SIGTERM' })).toBe(143);
  // Neither (a process that could not start): a plain failure.
  expect(exitStatus({})).toBe(1);
});
