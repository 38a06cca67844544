import { describe, expect, it } from 'vitest';
import type { VerifierRun } from '../environments/types.js';
import { StageError } from '../stage-error.js';
import { forfeit, killedBy } from './verdict.js';

const run = (r: Partial<VerifierRun>): VerifierRun => ({
  exitCode: 0,
  signal: null,
  timedOut: false,
  failedToStart: null,
  limit: null,
  stdout: '',
  stderr: '',
  rewardDir: null,
  ...r,
});

describe('a verifier run the agent could have cut short', () => {
  it('scores 0 with the reason: killed by a signal, an exit that says so, a timeout, a cap', () => {
    expect(forfeit(run({ exitCode: 137 }), 'the verifier', 60)).toMatch(/exited 137: killed by SIGKILL/);
    expect(forfeit(run({ exitCode: 143 }), 'the verifier', 60)).toMatch(/SIGTERM/);
    expect(forfeit(run({ exitCode: null, signal: 'SIGKILL' }), 'the verifier', 60)).toMatch(/killed by SIGKILL/);
    expect(forfeit(run({ exitCode: null, timedOut: true }), 'the verifier', 60)).toMatch(/timed out after 60 s/);
    expect(forfeit(run({ exitCode: 1, limit: 'process limit 256 reached' }), 'the verifier', 60)).toMatch(/process limit/);
  });

  it('leaves an ordinary exit alone, pass or fail', () => {
    for (const code of [0, 1, 2, 5, 127, 128, 255]) expect(forfeit(run({ exitCode: code }), 'x', 1), String(code)).toBeNull();
    expect(killedBy(9 + 128)).toBe('SIGKILL');
    expect(killedBy(200)).toBeNull();
  });

  it('is the machine’s failure only when polar could not start it', () => {
    expect(() => forfeit(run({ exitCode: null, failedToStart: 'spawn bwrap ENOENT' }), 'the verifier', 60)).toThrow(StageError);
  });
});
