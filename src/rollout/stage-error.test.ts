import { describe, expect, it } from 'vitest';
import { Forfeit, StageError } from './stage-error.js';

// Issue 41, item 5: a wrapping error keeps the one it wraps as ES2022's `cause`, as undici's do.
describe('StageError', () => {
  it('keeps the error it wraps as its cause, and its stage and message', () => {
    const original = Object.assign(new Error('ENOENT: no such file or directory'), { code: 'ENOENT' });
    const e = new StageError('init', `could not copy the workspace: ${original.message}`, { cause: original });
    expect(e.cause).toBe(original);
    expect(e).toMatchObject({ name: 'StageError', stage: 'init', timedOut: false, message: 'could not copy the workspace: ENOENT: no such file or directory' });
  });

  it('says whether its stage ran out of time; without a cause it has none', () => {
    const e = new StageError('init', 'preparing the workspace ran past its budget', { timedOut: true });
    expect(e.timedOut).toBe(true);
    expect('cause' in e).toBe(false);
  });

  it('wrapped twice, the chain leads back to the first error', () => {
    const first = new Error('podman: image not known');
    const inner = new StageError('init', `could not start the container: ${first.message}`, { cause: first });
    const outer = new StageError('post', `could not start the verifier's container: ${inner.message}`, { cause: inner });
    expect((outer.cause as StageError).cause).toBe(first);
  });

  it('a Forfeit keeps its cause the same way', () => {
    const git = new Error('git add failed');
    expect(new Forfeit('the agent left git repositories in its workspace that polar cannot add: sub', { cause: git }).cause).toBe(git);
  });
});
