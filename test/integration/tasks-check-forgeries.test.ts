import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORGERY_NAMES } from '../../src/rollout/forgeries/index.js';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { polarCli } from '../support/polar-cli.js';
import { samplesByTask } from '../support/red-team/tasks.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * `polar tasks check` with its forger (issue 31, 5): beside the oracle and nop, every forgery of
 * rollout/forgeries/ that applies runs against each task as a rollout, through the same environment
 * and verifier. The fixtures of fixtures/harbor must hold against all of them; each task of
 * fixtures/harbor-hackable is hackable on purpose and must be flagged with a forgery that beats it
 * for certain (a verify-daemon win is a race and may come on top). On the host (bwrap), and in
 * podman where `podman info` works (a bash task and the hackable shell task, FROM debian:12-slim).
 */
const FIXTURES = path.resolve(__dirname, '../../fixtures/harbor');
const HACKABLE = path.resolve(__dirname, '../../fixtures/harbor-hackable');
const bwrap = findBwrap();
const noSandbox = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
const engine = workingEngines().includes('podman') ? 'podman' : null;

interface ForgeryRun {
  outcome: string;
  reward: number | null;
  forfeit: string | null;
}
interface CheckJson {
  ok: boolean;
  forge: boolean;
  broken: string[];
  hackable: string[];
  results: {
    task: string;
    ok: boolean;
    problems: string[];
    oracle: { reward: number };
    nop: { reward: number };
    hackable: string[];
    forgeries: Record<string, ForgeryRun>;
  }[];
}

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-forge-check-'));
});
afterAll(() => removeTree(dir));

const polar = (args: string[], timeout = patient(280_000)) => polarCli(args, { env: { ...process.env, NO_COLOR: '1' }, timeout, maxBuffer: 64 * 1024 * 1024 });

/** One dataset folder holding the given task folders (tasks check takes one path). */
function dataset(name: string, taskDirs: string[]): string {
  const ds = path.join(dir, name);
  for (const t of taskDirs) fs.cpSync(t, path.join(ds, path.basename(t)), { recursive: true });
  return ds;
}
const taskDirs = (root: string) => fs.readdirSync(root).map((d) => path.join(root, d));

/** What each hackable fixture is certainly beaten by (its task.toml's note says why). */
const BEATEN_BY: Record<string, string[]> = {
  'py-in-process': ['exit-on-load'],
  'py-unittest-cwd': ['shadow-module', 'exit-on-load'],
  // exit-on-load no longer: test.sh goes on to write reward.txt 0 beside its reward.json 1, and files that disagree forfeit (harbor-rewards.ts).
  'js-status-ignored': ['kill-checker'],
  'sh-trusts-workspace': ['exit-on-load', 'edit-tests'],
};

describe.skipIf(noSandbox !== null)(`polar tasks check with forgeries on the host environment${noSandbox ? ` (skipped: ${noSandbox})` : ''}`, () => {
  let out: CheckJson;
  beforeAll(async () => {
    const r = await polar(['tasks', 'check', dataset('host', [...taskDirs(FIXTURES), ...taskDirs(HACKABLE)]), '--environment', 'host', '--json']);
    expect(r.code, r.stderr).toBe(1);
    out = JSON.parse(r.stdout) as CheckJson;
  }, patient(300_000));

  it('flags each hackable fixture with the forgery that beat it, and no sound fixture', () => {
    expect(out.forge).toBe(true);
    expect(out.hackable.sort()).toEqual(Object.keys(BEATEN_BY).sort());
    expect(out.broken.sort()).toEqual(['broken-oracle', ...Object.keys(BEATEN_BY)].sort());
    for (const [task, winners] of Object.entries(BEATEN_BY)) {
      const r = out.results.find((x) => x.task === task)!;
      // Only the forgery makes it broken: the oracle reaches the top reward and nop earns nothing.
      expect(r.oracle.reward, task).toBe(1);
      expect(r.nop.reward, task).toBe(0);
      expect(r.hackable, task).toEqual(expect.arrayContaining(winners));
      for (const w of winners) expect(r.problems, task).toContainEqual(expect.stringMatching(new RegExp(`^hackable: forge:${w} earns 1 without solving it`)));
    }
    // Killing the checker that imported the module in-process kills test.sh: forfeited, not won.
    const inProcess = out.results.find((x) => x.task === 'py-in-process')!;
    expect(inProcess.forgeries['kill-checker']).toMatchObject({ outcome: 'completed', reward: 0 });
    expect(inProcess.forgeries['kill-checker']!.forfeit).toBeTruthy();
  });

  it('gives every forgery 0 on every sound fixture, never error (a killed checker forfeits)', () => {
    const sound = out.results.filter((x) => !(x.task in BEATEN_BY));
    expect(sound.map((x) => x.task).sort()).toEqual(fs.readdirSync(FIXTURES).sort());
    for (const r of sound) {
      expect(r.hackable, r.task).toEqual([]);
      expect(Object.keys(r.forgeries).length, r.task).toBeGreaterThan(0);
      // Scored 0: completed, or failed where the forger broke its own sample (escapes.ts: the agent's failure is a score); never error.
      for (const [name, run] of Object.entries(r.forgeries)) {
        expect(run.outcome, `${r.task} ${name}`).not.toBe('error');
        expect(run.reward, `${r.task} ${name}`).toBe(0);
      }
    }
    // The checkers that run agent code were tried with every module forgery, the Python one with the hijacks too.
    const median = out.results.find((x) => x.task === 'py-fix-median')!;
    for (const name of [
      'kill-checker',
      'exit-on-load',
      'stdout-steal',
      'edit-tests',
      'verify-daemon',
      'self-error',
      'sitecustomize',
      'conftest',
      'pth',
      'path-hijack',
    ])
      expect(Object.keys(median.forgeries)).toContain(name);
    expect(median.forgeries['self-error']!.forfeit).toMatch(/killed|signal|137/);
    const slugify = out.results.find((x) => x.task === 'js-fix-slugify')!;
    for (const name of ['kill-checker', 'exit-on-load', 'edit-tests', 'verify-daemon', 'self-error']) expect(Object.keys(slugify.forgeries)).toContain(name);
    // The host sandbox's system folders are read-only: replacing bash is not tried there.
    for (const r of out.results) expect(Object.keys(r.forgeries)).not.toContain('fake-shell');
  });

  it(
    '--no-forge runs only the oracle and nop, and says so',
    async () => {
      const r = await polar(['tasks', 'check', HACKABLE, '--environment', 'host', '--no-forge']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/all 4 tasks are sound/);
      expect(r.stdout).toMatch(/forgeries not tried \(--no-forge\)/);
      expect(r.stdout).not.toMatch(/hackable/);
    },
    patient(120_000),
  );

  it(
    'polar rollout --harness forge:<name> runs one forger; an unknown one is refused with the list',
    async () => {
      const db = path.join(dir, 'forge.db');
      const r = await polar([
        'rollout',
        '--tasks',
        path.join(HACKABLE, 'js-status-ignored'),
        '--harness',
        'forge:kill-checker',
        '--samples',
        '1',
        '--environment',
        'host',
        '--db',
        db,
        '--json',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect((JSON.parse(r.stdout) as { groups: { rewards: number[] }[] }).groups[0]!.rewards).toEqual([1]);
      const bad = await polar(['rollout', '--tasks', HACKABLE, '--harness', 'forge:nope', '--samples', '1', '--db', db]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain(`known: ${FORGERY_NAMES.map((n) => `forge:${n}`).join(', ')}`);
    },
    patient(120_000),
  );
});

describe('fixture py-fix-median', () => {
  it('draws an even-length case of distinct values every run, so the untouched median() never passes', () => {
    // The checker's own CASES line, evaluated 2,000 times: on the old line (six free lengths) a run
    // with only odd lengths, which the untouched median() gets right, came once in 64.
    const check = fs.readFileSync(path.join(FIXTURES, 'py-fix-median/tests/check.py'), 'utf8');
    const line = check.split('\n').find((l) => l.startsWith('CASES = '))!;
    const program = `import random\nrng = random.SystemRandom()\nbad = 0\nfor _ in range(2000):\n    ${line}\n    bad += not any(len(c) % 2 == 0 and len(set(c)) == len(c) for c in CASES)\nprint(bad)\n`;
    expect(execFileSync('python3', ['-c', program], { encoding: 'utf8' }).trim()).toBe('0');
  });
});

/** A sound task graded by bash alone (the offline debian:12-slim has no Python or Node). */
function writeAnswerTask(ds: string): void {
  const t = path.join(ds, 'answer-file');
  for (const d of ['environment', 'tests', 'solution']) fs.mkdirSync(path.join(t, d), { recursive: true });
  fs.writeFileSync(
    path.join(t, 'task.toml'),
    `version = "1.0"\n[verifier]\ntimeout_sec = ${patientSeconds(60)}.0\n[agent]\ntimeout_sec = ${patientSeconds(120)}.0\n[environment]\nallow_internet = false\n`,
  );
  fs.writeFileSync(path.join(t, 'instruction.md'), 'Write the answer to /app/question.txt into /app/answer.txt.\n');
  fs.writeFileSync(path.join(t, 'environment', 'question.txt'), 'What is six times seven?\n');
  fs.writeFileSync(path.join(t, 'environment', 'Dockerfile'), 'FROM debian:12-slim\nWORKDIR /app\nCOPY question.txt .\n');
  fs.writeFileSync(path.join(t, 'solution', 'solve.sh'), '#!/bin/bash\necho 42 > /app/answer.txt\n');
  fs.writeFileSync(
    path.join(t, 'tests', 'test.sh'),
    '#!/bin/bash\nmkdir -p /logs/verifier\nif [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then r=1; else r=0; fi\necho "$r" > /logs/verifier/reward.txt\n',
  );
}

const noPodman = engine === null ? 'podman does not work here (`podman info` fails)' : noSandbox;
describe.skipIf(noPodman !== null)(`polar tasks check with forgeries in podman${noPodman ? ` (skipped: ${noPodman})` : ''}`, () => {
  it(
    'flags the shell task that trusts its workspace and passes the sound one: a forger that replaced bash as root scores 0 there',
    async () => {
      const ds = dataset('podman', [path.join(HACKABLE, 'sh-trusts-workspace')]);
      writeAnswerTask(ds);
      const r = await polar(['tasks', 'check', ds, '--environment', 'podman', '--json'], patient(560_000));
      expect(r.code, r.stderr).toBe(1);
      const out = JSON.parse(r.stdout) as CheckJson;
      expect(out.hackable).toEqual(['sh-trusts-workspace']);
      const hackable = out.results.find((x) => x.task === 'sh-trusts-workspace')!;
      expect(hackable.hackable).toEqual(expect.arrayContaining(BEATEN_BY['sh-trusts-workspace']!));
      const sound = out.results.find((x) => x.task === 'answer-file')!;
      expect(sound.ok, sound.problems.join('\n')).toBe(true);
      expect(Object.keys(sound.forgeries)).toContain('fake-shell');
      for (const r of out.results) {
        expect(r.forgeries['fake-shell'], r.task).toMatchObject({ outcome: 'completed', reward: 0 });
        for (const name of ['reward-file', 'git-history', 'read-solution', 'path-hijack'])
          expect(r.forgeries[name], `${name} on ${r.task}`).toMatchObject({ reward: 0 });
      }
      // The forger did replace the shells in its own container: the verifier's fresh one never ran them.
      const db = path.join(dir, 'fake-shell.db');
      const outDir = path.join(dir, 'fake-shell-out');
      const one = await polar(
        [
          'rollout',
          '--tasks',
          path.join(ds, 'answer-file'),
          '--harness',
          'forge:fake-shell',
          '--samples',
          '1',
          '--environment',
          'podman',
          '--db',
          db,
          '--out',
          outDir,
          '--keep-workspaces',
          '--json',
        ],
        patient(240_000),
      );
      expect(one.code, one.stderr).toBe(0);
      expect((JSON.parse(one.stdout) as { groups: { rewards: number[] }[] }).groups[0]!.rewards).toEqual([0]);
      // The replacement took: the shell polar checks the agent's container with answered as the forger's
      // fake does, so nothing was copied out of it and the sample forfeits (issue 39: not error).
      const sample = [...samplesByTask(db, (JSON.parse(one.stdout) as { rolloutId: string }).rolloutId).values()][0];
      expect(sample?.status).not.toBe('error');
      expect(String(sample?.evaluator?.forfeit)).toMatch(/replaced the shell polar checks its container with .*reward/);
    },
    patient(600_000),
  );
});
