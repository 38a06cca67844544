import fs from 'node:fs';
import path from 'node:path';
import type { Yaml } from '../yaml.js';
import { batchSplitProblems } from './batch-split.js';
import { failedAsserts, missingKeys, type Contract, type RunKind } from './contract.js';
import { loadWithInheritance, mergeWithOverride } from './merge.js';
import { scanConfigReads } from './scan-reads.js';

/**
 * A NeMo-RL checkout read against the pinned list, before anything starts: is it the pinned commit,
 * are the files there, does each pinned line still read its key (else where it moved, or that it is
 * gone), and does polar's config merged onto *this checkout's* base config hold every key the list
 * requires. Missing keys are the crash NeMo-RL would hit in setup(); moved lines only say the list
 * was read at another commit and should be read again.
 */
export interface CheckoutReport {
  /** HEAD of the checkout, when it is a git checkout. */
  commit: string | null;
  pinned: string;
  missingFiles: string[];
  moved: { key: string; file: string; from: number[]; to: number[] }[];
  gone: { key: string; file: string; lines: number[] }[];
  /** Required keys the merged config lacks, with where NeMo-RL reads them. */
  missingKeys: { key: string; at: string }[];
  /** Asserts of the list the merged config fails (`file:line: what (why)`). */
  failedAsserts: string[];
  /**
   * GRPO: how the merged config's step batch would not split over its GPUs (batch-split.ts), each
   * `file:line: what — what to change`; NeMo-RL would fail on it at its first step.
   */
  batchSplit: string[];
  /** Config reads in the run's files that the list neither requires nor reviewed: new upstream, for a person to read. */
  newReads: { key: string; file: string; line: number }[];
  /** The base config could not be read (the key check was skipped), and why. */
  baseUnreadable: string | null;
  checkedReads: number;
  /** GRPO only (null for SFT): the Gym submodule, whether it is checked out, its commit, the files of the list it lacks. */
  gym: { root: string; checkedOut: boolean; commit: string | null; pinned: string; missingFiles: string[] } | null;
}

export function checkCheckout(checkout: string, kind: RunKind, generated: Yaml, contract: Contract): CheckoutReport {
  const run = contract.runs[kind];
  const report: CheckoutReport = {
    commit: headCommit(checkout),
    pinned: contract.pinned.nemo_rl.commit,
    missingFiles: [],
    moved: [],
    gone: [],
    missingKeys: [],
    failedAsserts: [],
    batchSplit: [],
    newReads: [],
    baseUnreadable: null,
    checkedReads: 0,
    gym: null,
  };
  const sources = new Map<string, string[] | null>();
  const lines = (file: string) => {
    if (!sources.has(file)) {
      const full = path.join(checkout, file);
      sources.set(file, fs.existsSync(full) ? fs.readFileSync(full, 'utf8').split('\n') : null);
    }
    return sources.get(file)!;
  };
  for (const file of [run.entry, run.base, ...run.files]) if (!lines(file) && !report.missingFiles.includes(file)) report.missingFiles.push(file);

  for (const read of contract.reads[kind]) {
    if (read.off_path) continue;
    const text = lines(read.file);
    if (!text) continue;
    report.checkedReads++;
    const last = read.key.split('.').at(-1)!;
    // The key as a subscript, or alone on its line (a subscript Black split over three lines). Only
    // the last key segment is matched, so a moved read may list other reads of a same-named key too.
    const alone = new RegExp(`^\\s*["']${last.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}["']\\s*$`);
    const reads = (line: string | undefined) =>
      line !== undefined &&
      (read.match !== undefined ? line.includes(read.match) : line.includes(`["${last}"]`) || line.includes(`['${last}']`) || alone.test(line));
    if (read.lines.every((n) => reads(text[n - 1]))) continue;
    const now = text.flatMap((line, i) => (reads(line) ? [i + 1] : []));
    if (now.length === 0) report.gone.push({ key: read.key, file: read.file, lines: read.lines });
    else report.moved.push({ key: read.key, file: read.file, from: read.lines, to: now });
  }

  report.newReads = newReads(kind, contract, lines);

  if (kind === 'grpo') {
    const gymRoot = path.join(checkout, contract.gym.root);
    const checkedOut = fs.existsSync(gymRoot) && fs.readdirSync(gymRoot).length > 0;
    const missingFiles = contract.gym.files.map((f) => f.path).filter((f) => !fs.existsSync(path.join(gymRoot, f)));
    report.gym = { root: contract.gym.root, checkedOut, commit: checkedOut ? headCommit(gymRoot) : null, pinned: contract.pinned.gym.commit, missingFiles };
  }

  const basePath = path.join(checkout, run.base);
  if (fs.existsSync(basePath)) {
    try {
      const base = loadWithInheritance(basePath, (f) => fs.readFileSync(f, 'utf8'));
      const own =
        typeof generated === 'object' && generated !== null && !Array.isArray(generated)
          ? Object.fromEntries(Object.entries(generated).filter(([k]) => k !== 'defaults'))
          : generated;
      const merged = mergeWithOverride(base, own);
      report.missingKeys = missingKeys(kind, contract, merged);
      report.failedAsserts = failedAsserts(kind, contract, merged);
      if (kind === 'grpo') report.batchSplit = batchSplitProblems(merged);
    } catch (err) {
      report.baseUnreadable = (err as Error).message;
    }
  }
  return report;
}

/**
 * Config reads in the run's files (scan-reads.ts) whose key the list has never seen: not a read it
 * requires or marks off-path, not one it reviewed as guarded, not a key NeMo-RL fills or pydantic
 * requires, nor a section above one of those. Each is a read a newer NeMo-RL makes that may crash a
 * run on a key polar's config lacks.
 */
function newReads(kind: RunKind, contract: Contract, lines: (file: string) => string[] | null): CheckoutReport['newReads'] {
  const known = new Set<string>();
  for (const k of ['grpo', 'sft'] as const) {
    for (const r of [...contract.reads[k], ...(contract.reviewed?.[k] ?? [])]) known.add(r.key.replace('[]', ''));
    for (const t of contract.typed_required[k]) known.add(t.key);
  }
  for (const f of contract.filled) known.add(f.key);
  const sections = new Set([...known].flatMap((k) => k.split('.').map((_, i, parts) => parts.slice(0, i).join('.'))));
  const out: CheckoutReport['newReads'] = [];
  for (const file of contract.runs[kind].files) {
    const text = lines(file);
    if (!text) continue;
    for (const r of scanConfigReads(file, text.join('\n'))) if (!known.has(r.key) && !sections.has(r.key)) out.push({ key: r.key, file, line: r.line });
  }
  return out;
}

/** Problems for preflight: keys a run would crash on are errors; drift from the pin is a warning. */
export function describeReport(report: CheckoutReport, checkout: string, reportFile?: string): { errors: string[]; warnings: string[] } {
  const errors: string[] = [];
  const warnings: string[] = [];
  const pin = report.pinned.slice(0, 7);
  for (const m of report.missingKeys)
    errors.push(
      `the config merged onto ${checkout}'s base config has no ${m.key}, which NeMo-RL reads unguarded (${m.at}): set it with --set ${m.key.replace('[]', '')}=… (polar's pinned list is NeMo-RL ${pin})`,
    );
  for (const a of report.failedAsserts)
    errors.push(
      `the config merged onto ${checkout}'s base config fails what NeMo-RL asserts at ${a}; change it with --set or --config (polar's pinned list is NeMo-RL ${pin})`,
    );
  for (const b of report.batchSplit) errors.push(`the batch does not split over the GPUs as NeMo-RL asserts at ${b} (polar's pinned list is NeMo-RL ${pin})`);
  if (report.newReads.length > 0) {
    const shown = report.newReads.slice(0, 8).map((r) => `${r.key} (${r.file}:${r.line})`);
    warnings.push(
      `new reads to review: ${report.newReads.length} config read${report.newReads.length === 1 ? '' : 's'} in ${checkout} that polar's pinned list (NeMo-RL ${pin}) does not know: ${shown.join('; ')}${report.newReads.length > 8 ? '; …' : ''}. Read each: one the merged config lacks crashes NeMo-RL (add it with --set)`,
    );
  }
  if (report.baseUnreadable) warnings.push(`could not read the checkout's base config (${report.baseUnreadable}); the merged-key check was skipped`);
  const drift: string[] = [];
  if (report.commit && !report.commit.startsWith(pin)) drift.push(`checkout is at ${report.commit.slice(0, 7)}, polar's list was read at ${pin}`);
  if (report.missingFiles.length > 0) drift.push(`files gone: ${report.missingFiles.join(', ')}`);
  if (report.gym?.commit && !report.gym.commit.startsWith(report.gym.pinned.slice(0, 7)))
    drift.push(`its Gym submodule is at ${report.gym.commit.slice(0, 7)}, polar's list was read at ${report.gym.pinned.slice(0, 7)}`);
  if (report.gym?.checkedOut && report.gym.missingFiles.length > 0) drift.push(`Gym files gone: ${report.gym.missingFiles.join(', ')}`);
  if (report.gym && !report.gym.checkedOut)
    warnings.push(
      `${checkout} has no NeMo Gym (the submodule ${report.gym.root} is empty or absent): GRPO with polar's agent runs in it; \`git -C ${checkout} submodule update --init --recursive\``,
    );
  if (report.gone.length > 0) drift.push(`no longer read: ${report.gone.map((g) => `${g.key} (${g.file}:${g.lines.join(',')})`).join('; ')}`);
  if (report.moved.length > 0) {
    const shown = report.moved.slice(0, 3).map((m) => `${m.key} ${m.file}:${m.from.join(',')} → :${m.to.join(',')}`);
    drift.push(`${report.moved.length} of ${report.checkedReads} reads moved (${shown.join('; ')}${report.moved.length > 3 ? '; …' : ''})`);
  }
  if (drift.length > 0)
    warnings.push(
      `NeMo-RL checkout differs from the pinned list: ${drift.join('; ')}${reportFile ? ` (all of it in ${reportFile})` : ''}; what NeMo-RL reads there may have changed: read those places before trusting a run`,
    );
  return { errors, warnings };
}

/** The checked-out commit, read from .git without running git (a worktree's .git file is followed). */
export function headCommit(checkout: string): string | null {
  try {
    let gitDir = path.join(checkout, '.git');
    if (fs.statSync(gitDir).isFile()) {
      const pointer = /^gitdir:\s*(.+)$/m.exec(fs.readFileSync(gitDir, 'utf8'))?.[1]?.trim();
      if (!pointer) return null;
      gitDir = path.resolve(checkout, pointer);
    }
    const head = fs.readFileSync(path.join(gitDir, 'HEAD'), 'utf8').trim();
    const ref = /^ref:\s*(.+)$/.exec(head)?.[1];
    if (!ref) return /^[0-9a-f]{40}$/.test(head) ? head : null;
    const loose = path.join(gitDir, ref);
    if (fs.existsSync(loose)) return fs.readFileSync(loose, 'utf8').trim();
    const packed = path.join(gitDir, 'packed-refs');
    if (!fs.existsSync(packed)) return null;
    const line = fs
      .readFileSync(packed, 'utf8')
      .split('\n')
      .find((l) => l.endsWith(` ${ref}`));
    return line ? line.split(' ')[0]! : null;
  } catch {
    return null;
  }
}
