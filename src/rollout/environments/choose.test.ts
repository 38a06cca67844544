import { describe, expect, it } from 'vitest';
import { chooseEnvironment, environmentNotice } from './choose.js';

describe('chooseEnvironment', () => {
  it('unasked, the first engine that works (the task image), host where none does', () => {
    expect(chooseEnvironment(undefined, () => ['podman'])).toBe('podman');
    expect(chooseEnvironment(undefined, () => ['docker', 'podman'])).toBe('docker');
    expect(chooseEnvironment(undefined, () => [])).toBe('host');
  });

  it('host when asked, without probing any engine', () => {
    expect(
      chooseEnvironment('host', () => {
        throw new Error('probed');
      }),
    ).toBe('host');
  });

  it('an engine asked for that does not work here is a usage error naming the one that does', () => {
    expect(chooseEnvironment('podman', () => ['podman'])).toBe('podman');
    expect(() => chooseEnvironment('docker', () => ['podman'])).toThrow(/--environment docker: no working docker here.*working: podman/);
  });

  it('says so only when it chose an engine itself', () => {
    expect(environmentNotice(undefined, 'podman')).toMatch(/own images with podman.*--environment host/);
    expect(environmentNotice('podman', 'podman')).toBeNull();
    expect(environmentNotice(undefined, 'host')).toBeNull();
  });
});
