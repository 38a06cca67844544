import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../../sandbox/index.js';
import { ancestors, withTaskMemory } from './open.js';

describe('container trial helpers', () => {
  it('ancestors: every folder above the mounts, below /, once each', () => {
    expect(ancestors(['/root/polar/node_modules', '/root/polar/.polar/runs/s1/home', '/usr/bin/node', '/run/polar/proxy.sock'])).toEqual([
      '/root',
      '/root/polar',
      '/root/polar/.polar',
      '/root/polar/.polar/runs',
      '/root/polar/.polar/runs/s1',
      '/run',
      '/run/polar',
      '/usr',
      '/usr/bin',
    ]);
    expect(ancestors(['/top'])).toEqual([]);
  });

  it("withTaskMemory: the lower of polar's cap and the task's, the task's where polar has none", () => {
    expect(withTaskMemory({ ...DEFAULT_LIMITS, maxMemoryBytes: 4096 }, 1024).maxMemoryBytes).toBe(1024);
    expect(withTaskMemory({ ...DEFAULT_LIMITS, maxMemoryBytes: 512 }, 1024).maxMemoryBytes).toBe(512);
    expect(withTaskMemory({ ...DEFAULT_LIMITS, maxMemoryBytes: 0 }, 1024).maxMemoryBytes).toBe(1024);
    expect(withTaskMemory({ ...DEFAULT_LIMITS, maxMemoryBytes: 512 }, undefined).maxMemoryBytes).toBe(512);
  });
});
