import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS, type SandboxSettings } from '../sandbox/index.js';
import { rolloutInsidePaths } from './sandboxing.js';

const settings: SandboxSettings = { kind: 'bwrap', bwrap: '/usr/bin/bwrap', network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [] };

describe('rolloutInsidePaths: one computation for harness, setup, evaluator and the probe', () => {
  it('counts the task folder the evaluator mounts: a tasks file in /workspace moves the workspace aside', () => {
    expect(rolloutInsidePaths(settings, { tasksDir: '/srv/tasks' })?.workspace).toBe('/workspace');
    expect(rolloutInsidePaths(settings, { tasksDir: '/workspace' })?.workspace).toBe('/polar/workspace');
    expect(rolloutInsidePaths(settings, { tasksDir: '/workspace/suite' })?.workspace).toBe('/polar/workspace');
  });

  it('counts a harness binary given by path, for the workspace and the home alike', () => {
    expect(rolloutInsidePaths(settings, { tasksDir: null, harnessBin: '/workspace/bin/claude' })?.workspace).toBe('/polar/workspace');
    expect(rolloutInsidePaths(settings, { tasksDir: null, harnessBin: '/home/agent/bin/claude' })?.home).toBe('/polar/home');
  });

  it('is null without a sandbox: the host paths are used', () => {
    expect(rolloutInsidePaths({ ...settings, kind: 'none' }, { tasksDir: '/workspace' })).toBeNull();
  });
});
