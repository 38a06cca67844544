import fs from 'node:fs';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import { InvalidArgumentError, Option, type Command } from 'commander';
import {
  bwrapProblem,
  DEFAULT_LIMITS,
  findBwrap,
  formatBytes,
  parseSize,
  requireBwrap,
  type SandboxKind,
  type SandboxLimits,
  type SandboxSettings,
} from '../sandbox/index.js';
import { integerArg } from './numbers.js';

/** The sandbox flags `rollout`, `run`, `worker` and `gym-agent` share. */
export interface SandboxFlags {
  sandbox?: SandboxKind;
  network?: 'proxy-only' | 'host';
  sandboxRo?: string[];
  maxProcs?: number;
  maxMemory?: number;
  maxFileSize?: number;
  maxCpuSeconds?: number;
}

export function addSandboxOptions(cmd: Command, what = 'harness, setup and evaluator commands'): Command {
  return cmd
    .addOption(new Option('--sandbox <kind>', `isolate ${what}: bwrap (default when installed) or none`).choices(['bwrap', 'none']))
    .addOption(
      new Option(
        '--network <mode>',
        "the harness's network in the sandbox: proxy-only (default: the capture proxy alone) or host (this machine's network)",
      ).choices(['proxy-only', 'host']),
    )
    .option('--sandbox-ro <path>', 'a path every sandbox also sees read-only (a custom harness script, a toolchain); repeatable', collect, [])
    .option('--max-procs <n>', `processes and threads per sample (0: no cap; default ${DEFAULT_LIMITS.maxProcs})`, integerArg('--max-procs', 0))
    .option('--max-memory <size>', `memory per sample, e.g. 4g (0: no cap; default ${formatBytes(DEFAULT_LIMITS.maxMemoryBytes)})`, sizeArg('--max-memory'))
    .option(
      '--max-file-size <size>',
      `largest file a sample may write, e.g. 1g (0: no cap; default ${formatBytes(DEFAULT_LIMITS.maxFileSizeBytes)})`,
      sizeArg('--max-file-size'),
    )
    .option('--max-cpu-seconds <n>', `CPU seconds per sample (0: no cap; default ${DEFAULT_LIMITS.maxCpuSeconds})`, integerArg('--max-cpu-seconds', 0));
}

/** `bwrap` unless asked otherwise or bubblewrap is missing or cannot work here (the caller warns then). */
export function sandboxKind(flags: SandboxFlags): SandboxKind {
  if (flags.sandbox) return flags.sandbox;
  const bwrap = findBwrap();
  return bwrap && bwrapProblem(bwrap) === null ? 'bwrap' : 'none';
}

/** The settings a single-process command (`run`, `demo`) sandboxes its harness with; bwrap asked for and missing is a usage error. */
export function settingsFrom(flags: SandboxFlags): SandboxSettings {
  const kind = sandboxKind(flags);
  return { kind, bwrap: requireBwrap(kind), network: flags.network ?? 'proxy-only', limits: limitsFrom(flags), extraReadOnly: readOnlyFrom(flags) };
}

export function limitsFrom(flags: SandboxFlags, base: SandboxLimits = DEFAULT_LIMITS): SandboxLimits {
  return {
    maxProcs: flags.maxProcs ?? base.maxProcs,
    maxMemoryBytes: flags.maxMemory ?? base.maxMemoryBytes,
    maxFileSizeBytes: flags.maxFileSize ?? base.maxFileSizeBytes,
    maxCpuSeconds: flags.maxCpuSeconds ?? base.maxCpuSeconds,
  };
}

/** Whether any cap was given on the command line (a resume keeps the stored ones otherwise). */
export function limitsGiven(flags: SandboxFlags): boolean {
  return [flags.maxProcs, flags.maxMemory, flags.maxFileSize, flags.maxCpuSeconds].some((v) => v !== undefined);
}

export function readOnlyFrom(flags: SandboxFlags): string[] {
  const paths = (flags.sandboxRo ?? []).map((p) => path.resolve(p));
  const missing = paths.filter((p) => !fs.existsSync(p));
  if (missing.length > 0) throw new PolarError('POLAR_USAGE', `--sandbox-ro: no such file or folder: ${missing.join(', ')}`);
  return paths;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function sizeArg(flag: string): (value: string) => number {
  return (value) => {
    try {
      return parseSize(value);
    } catch {
      throw new InvalidArgumentError(`${flag} must be a size such as 4g, 512m or 0, got ${JSON.stringify(value)}`);
    }
  };
}
