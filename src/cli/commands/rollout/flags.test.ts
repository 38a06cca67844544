import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { EnvironmentName } from '../../../rollout/environments/names.js';
import { DEFAULT_LIMITS } from '../../../sandbox/index.js';
import { sandboxKind } from '../../sandbox-options.js';
import { addRolloutFlags, givenOn, newArgs, queuedArgs, type RolloutOptions, resumeArgs } from './flags.js';
import { removeTree } from '../../../../test/support/remove-tree.js';

// The engine probe (`podman info`) is the machine's business; this file tests the mapping of
// --environment, so every asked engine "works" and a run without Harbor tasks stays on the host.
vi.mock('../../environment-option.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../../environment-option.js')>()),
  harborEnvironment: (asked: EnvironmentName | undefined, harbor: boolean): EnvironmentName => (harbor ? (asked ?? 'host') : 'host'),
}));

const HARBOR_TASK = path.resolve(import.meta.dirname, '..', '..', '..', '..', 'fixtures', 'harbor', 'js-fix-slugify');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-rollout-flags-'));
const readOnly = fs.mkdtempSync(path.join(tmp, 'ro-'));
afterAll(() => removeTree(tmp));

/** Every flag that sets a config field, each given a value other than its default. */
const CONFIG_FLAGS = [
  ['--harness', 'custom'],
  ['--command', 'agent {prompt}'],
  ['--harness-bin', '/opt/agent/bin/agent'],
  ['--node', '/opt/node22/bin/node'],
  ['--upstream', 'http://gpu:8000'],
  ['--upstream-kind', 'vllm-tito'],
  ['--tokenizer', 'bundled:qwen3'],
  ['--tool-parser', 'qwen3-coder'],
  ['--temperature', '0.7'],
  ['--top-p', '0.9'],
  ['--thinking', 'off'],
  ['--model', 'qwen3-8b'],
  ['--context-window', '32768'],
  ['--samples', '3'],
  ['--concurrency', '5'],
  ['--init-workers', '4'],
  ['--post-workers', '6'],
  ['--timeout', '120'],
  ['--out', path.join(tmp, 'out')],
  ['--accept', 'reward>=1'],
  ['--keep-workspaces'],
  ['--sandbox', 'bwrap'],
  ['--network', 'host'],
  ['--sandbox-ro', readOnly],
  ['--max-procs', '64'],
  ['--max-memory', '2g'],
  ['--max-file-size', '100m'],
  ['--max-cpu-seconds', '60'],
  ['--environment', 'podman'],
  ['--reward-key', 'correctness'],
  // A negative LO: commander hands a required value over even when it starts with a dash.
  ['--reward-range', '-1,1'],
  ['--keep-compaction'],
].flat();

/** The rollout's options that set no config field: where it runs, its queue's settings, output. */
const NOT_CONFIG = ['tasks', 'db', 'resume', 'queue', 'wait', 'retries', 'heartbeat', 'json'];

/** The command line as `polar rollout` parses it (the real option definitions, defaults included). */
function parse(argv: string[]): { opts: RolloutOptions; command: Command } {
  const command = addRolloutFlags(new Command('rollout')).exitOverride();
  command.parse(argv, { from: 'user' });
  return { opts: command.opts<RolloutOptions>(), command };
}

function newRun(argv: string[]) {
  const { opts } = parse(['--tasks', HARBOR_TASK, ...argv]);
  return newArgs(opts, sandboxKind(opts)).config;
}

function queued(argv: string[]) {
  const { opts } = parse(['--tasks', HARBOR_TASK, '--queue', 'postgres://polar@db/polar', ...argv]);
  return queuedArgs(opts).config;
}

function resume(argv: string[]) {
  const { opts, command } = parse(['--resume', 'rol_1', ...argv]);
  return resumeArgs(opts, sandboxKind(opts), givenOn(command)).overrides;
}

describe('rollout flags → config: one mapping for a new run, a queued run and a resume', () => {
  it('every option of the command is either in CONFIG_FLAGS or sets no config field (a new flag must be added to this test)', () => {
    const { command } = parse(['--tasks', HARBOR_TASK, ...CONFIG_FLAGS]);
    const given = givenOn(command);
    const untested = command.options.map((o) => o.attributeName()).filter((name) => !given(name as keyof RolloutOptions) && !NOT_CONFIG.includes(name));
    expect(untested).toEqual([]);
  });

  it('a new run stores every flag, in the order `rollout show --json` prints', () => {
    const config = newRun(CONFIG_FLAGS);
    expect(config).toEqual({
      harness: 'custom',
      command: 'agent {prompt}',
      harnessBin: '/opt/agent/bin/agent',
      nodeBin: '/opt/node22/bin/node',
      upstream: {
        url: 'http://gpu:8000',
        kind: 'vllm-tito',
        tokenizer: 'bundled:qwen3',
        toolParser: 'qwen3-coder',
        temperature: 0.7,
        topP: 0.9,
        thinking: 'off',
      },
      model: 'qwen3-8b',
      contextWindow: 32768,
      samples: 3,
      concurrency: 5,
      initWorkers: 4,
      postWorkers: 6,
      timeoutSec: 120,
      outDir: path.join(tmp, 'out'),
      accept: 'reward>=1',
      keepWorkspaces: true,
      sandbox: 'bwrap',
      network: 'host',
      limits: { maxProcs: 64, maxMemoryBytes: 2 * 1024 ** 3, maxFileSizeBytes: 100 * 1024 ** 2, maxCpuSeconds: 60 },
      sandboxReadOnly: [readOnly],
      environment: 'podman',
      rewardKey: 'correctness',
      rewardRange: [-1, 1],
      compaction: 'harness',
    });
    expect(Object.keys(config)).toEqual([
      'harness',
      'command',
      'harnessBin',
      'nodeBin',
      'upstream',
      'model',
      'contextWindow',
      'samples',
      'concurrency',
      'initWorkers',
      'postWorkers',
      'timeoutSec',
      'outDir',
      'accept',
      'keepWorkspaces',
      'sandbox',
      'network',
      'limits',
      'sandboxReadOnly',
      'environment',
      'rewardKey',
      'rewardRange',
      'compaction',
    ]);
    expect(Object.keys(config.upstream)).toEqual(['url', 'kind', 'tokenizer', 'toolParser', 'temperature', 'topP', 'thinking']);
  });

  it('a queued run stores the same config as a new run from the same flags', () => {
    const local = newRun(CONFIG_FLAGS);
    const onQueue = queued(CONFIG_FLAGS);
    expect(onQueue).toEqual(local);
    expect(JSON.stringify(onQueue)).toBe(JSON.stringify(local));
  });

  it("a resume overrides each field it may change with the new run's value from the same flag, and keeps the rollout's own", () => {
    const local = newRun(CONFIG_FLAGS);
    const overrides = resume(CONFIG_FLAGS) as Record<string, unknown>;
    for (const [key, value] of Object.entries(overrides)) expect(value, key).toEqual(local[key as keyof typeof local]);
    // What a resume keeps whatever the command line says: what the group's samples are, and where
    // the interrupted run left its workspaces.
    const kept = Object.keys(local).filter((key) => !(key in overrides));
    expect(kept).toEqual([
      'harness',
      'command',
      'contextWindow',
      'samples',
      'timeoutSec',
      'outDir',
      'accept',
      'environment',
      'rewardKey',
      'rewardRange',
      'compaction',
    ]);
  });

  it('a resume with one sandbox or sampling flag overrides that field alone (the stored rest stays)', () => {
    expect(resume(['--sandbox-ro', readOnly])).toEqual({ sandboxReadOnly: [readOnly] });
    expect(resume(['--max-memory', '2g'])).toEqual({ limits: { ...DEFAULT_LIMITS, maxMemoryBytes: 2 * 1024 ** 3 } });
    expect(resume(['--temperature', '0.7', '--top-p', '0.9', '--thinking', 'on'])).toEqual({ upstream: { temperature: 0.7, topP: 0.9, thinking: 'on' } });
    expect(resume(['--upstream', 'http://moved:8000'])).toEqual({ upstream: { url: 'http://moved:8000' } });
    // More workers for the samples left (run-rollout.ts: "a new upstream URL, more workers"); typed
    // only: commander's default 2 must not replace a stored 8.
    expect(resume(['--concurrency', '8', '--init-workers', '3', '--post-workers', '4'])).toEqual({ concurrency: 8, initWorkers: 3, postWorkers: 4 });
    expect(resume(['--concurrency', '2'])).toEqual({ concurrency: 2 });
  });

  it("commander's defaults are not flags: a resume without flags changes nothing; a new run stores them", () => {
    expect(resume([])).toEqual({});
    const config = newRun(['--harness', 'custom', '--upstream', 'http://gpu:8000', '--samples', '2', '--sandbox', 'bwrap', '--environment', 'host']);
    expect(config).toMatchObject({ upstream: { url: 'http://gpu:8000', kind: 'vllm' }, model: null, concurrency: 2, initWorkers: 2, postWorkers: 2 });
    expect(config).toMatchObject({ timeoutSec: 600, outDir: '', accept: null, keepWorkspaces: false, sandbox: 'bwrap' });
    // Absent rather than undefined: the stored JSON of older rollouts had no such keys.
    for (const key of ['command', 'harnessBin', 'nodeBin', 'network', 'sandboxReadOnly', 'environment', 'rewardKey', 'rewardRange', 'compaction'])
      expect(config, key).not.toHaveProperty(key);
  });

  it('--reward-key needs a name', () => {
    expect(() => parse(['--tasks', HARBOR_TASK, '--reward-key', ' '])).toThrow(/--reward-key needs the name of a metric/);
  });

  it('--reward-range is LO,HI, refused before the command starts (reward-range.ts)', () => {
    expect(newRun(['--harness', 'custom', '--upstream', 'http://gpu:8000', '--samples', '2', '--reward-range', '0,10']).rewardRange).toEqual([0, 10]);
    expect(newRun(['--harness', 'custom', '--upstream', 'http://gpu:8000', '--samples', '2', '--reward-range=-5,5']).rewardRange).toEqual([-5, 5]);
    for (const bad of ['0:1', '1', '0x0,1', '0,Infinity', '1,0'])
      expect(() => parse(['--tasks', HARBOR_TASK, '--reward-range', bad]), bad).toThrow(/--reward-range/);
  });
});
