import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { polarE2e } from './support.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * A suite that mixes every verdict (issue 32, 1): fixtures/harbor-mixed holds a valid task, a broken
 * one, two invalid ones (a `[task].name` Harbor's validator rejects, a timeout that is not a number),
 * one whose verifier needs the network (task.toml silent, so it has none here) and one whose base
 * image cannot be pulled offline. `polar tasks check` gives each its verdict; `polar rollout --tasks`
 * runs the loadable ones and says which it skipped. Before, one invalid task refused the whole suite.
 */
const MIXED = path.resolve(__dirname, '../../fixtures/harbor-mixed');
const bwrap = findBwrap();
const noSandbox = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
const podman = workingEngines().includes('podman');
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-mixed-'));
});
afterAll(() => {
  removeTree(dir);
});

interface CheckJson {
  ok: boolean;
  tasks: number;
  valid: string[];
  broken: string[];
  unverifiable: string[];
  invalid: string[];
  results: {
    task: string;
    verdict: string;
    problems: string[];
    unverifiable: string[];
    oracle: { reward: number | null; verifierFiles: Record<string, string> | null; networkHint: string | null } | null;
  }[];
}

const verdicts = (out: CheckJson) => Object.fromEntries(out.results.map((r) => [r.task, r.verdict]));

describe.skipIf(noSandbox !== null)(`a Harbor suite of mixed tasks${noSandbox ? ` (skipped: ${noSandbox})` : ''}`, () => {
  it(
    'polar tasks check on the host: a verdict per task, the invalid ones with their reasons, the verifier files and the network hint where they explain it',
    async () => {
      const r = await polarE2e(['tasks', 'check', MIXED, '--environment', 'host', '--no-forge', '--json']);
      // Exit 1: one task is broken; the invalid and unverifiable ones alone would not fail it.
      expect(r.code, r.stderr).toBe(1);
      const out = JSON.parse(r.stdout) as CheckJson;
      expect(verdicts(out)).toEqual({
        valid: 'valid',
        broken: 'broken',
        'bad-name': 'invalid',
        'bad-timeout': 'invalid',
        'needs-network': 'unverifiable',
        // Its image cannot be pulled here, but the host environment does not use it.
        unpullable: 'valid',
      });
      expect(out).toMatchObject({ ok: false, tasks: 6, broken: ['broken'], invalid: ['bad-name', 'bad-timeout'], unverifiable: ['needs-network'] });
      expect(out.valid.sort()).toEqual(['unpullable', 'valid']);
      const get = (t: string) => out.results.find((x) => x.task === t)!;
      expect(get('bad-name').problems.join('\n')).toMatch(
        /task\.name.*"mixed-bad-name" is not "org\/name": Harbor's own validator rejects it too.*config\.py:216-224/,
      );
      expect(get('bad-timeout').problems.join('\n')).toMatch(/verifier\.timeout_sec.*seconds, a positive number/);
      expect(get('broken').problems[0]).toMatch(/the oracle \(solution\/solve\.sh\) earned 0, not the top reward 1/);
      // The broken task forbids the internet: the network cannot explain it, so no hint.
      expect(get('broken').problems.join('\n')).not.toMatch(/network/);
      expect(get('broken').oracle!.networkHint).toBeNull();
      const net = get('needs-network');
      expect(net.problems).toEqual([]);
      expect(net.unverifiable.join('\n')).toMatch(/its verifier needs the network \(".*astral\.sh.*"\).*--network host gives Harbor's default/);
      // What test.sh wrote to /logs/verifier/test-stdout.txt (Harbor's convention), not its stdout.
      expect(net.oracle!.verifierFiles!['test-stdout.txt']).toMatch(/could not download uv/);
      expect(net.oracle!.networkHint).toMatch(/--network host/);

      // The text report says the same, with the file's tail under the task.
      const text = await polarE2e(['tasks', 'check', MIXED, '--environment', 'host', '--no-forge']);
      expect(text.code).toBe(1);
      expect(text.stdout).toMatch(/^invalid\s+bad-name {2}does not load, skipped$/m);
      expect(text.stdout).toMatch(/^BROKEN\s+broken {2}oracle 0, nop 0$/m);
      expect(text.stdout).toMatch(/^unverifiable needs-network {2}oracle 0, nop 0$/m);
      expect(text.stdout).toMatch(/\/logs\/verifier\/test-stdout\.txt \(its last lines\):\n.*\| fetching uv from astral\.sh/);
      expect(text.stdout).toMatch(/6 tasks: 2 valid, 1 broken, 1 unverifiable here, 2 invalid/);
      expect(text.stdout).toMatch(/--strict makes them fail the check/);
    },
    patient(300_000),
  );

  it(
    'exit 0 with only unverifiable and invalid tasks left, 1 with --strict; a single invalid task folder is a usage error',
    async () => {
      const suite = path.join(dir, 'no-broken');
      fs.mkdirSync(suite);
      for (const t of ['valid', 'needs-network', 'bad-name']) fs.cpSync(path.join(MIXED, t), path.join(suite, t), { recursive: true });
      const loose = await polarE2e(['tasks', 'check', suite, '--environment', 'host', '--no-forge', '--json']);
      expect(loose.code, loose.stderr).toBe(0);
      expect(JSON.parse(loose.stdout)).toMatchObject({ ok: true, valid: ['valid'], unverifiable: ['needs-network'], invalid: ['bad-name'], broken: [] });
      const strict = await polarE2e(['tasks', 'check', suite, '--environment', 'host', '--no-forge', '--strict', '--json']);
      expect(strict.code).toBe(1);
      expect(JSON.parse(strict.stdout).ok).toBe(false);
      const single = await polarE2e(['tasks', 'check', path.join(MIXED, 'bad-name'), '--environment', 'host']);
      expect(single.code).toBe(2);
      expect(single.stderr).toMatch(/the Harbor task has 1 problem; nothing was started:[\s\S]*task\.name/);
    },
    patient(300_000),
  );

  it(
    'polar rollout --tasks runs the valid tasks, says each one it skipped, and rollout show gives the verifier files and the hint',
    async () => {
      const db = path.join(dir, 'rollout.db');
      const r = await polarE2e(['rollout', '--tasks', MIXED, '--harness', 'oracle', '--samples', '1', '--environment', 'host', '--db', db, '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/notice: task bad-name skipped \(invalid\): .*task\.name.*Harbor's own validator rejects it too/);
      expect(r.stderr).toMatch(/notice: task bad-timeout skipped \(invalid\): .*verifier\.timeout_sec/);
      const summary = JSON.parse(r.stdout) as { rolloutId: string; groups: { taskId: string; rewards: number[] }[] };
      expect(Object.fromEntries(summary.groups.map((g) => [g.taskId, g.rewards]))).toEqual({
        broken: [0],
        'needs-network': [0],
        unpullable: [1],
        valid: [1],
      });
      const show = await polarE2e(['rollout', 'show', summary.rolloutId, '--db', db]);
      expect(show.code, show.stderr).toBe(0);
      const section = show.stdout.slice(show.stdout.indexOf('needs-network  group'));
      expect(section).toMatch(/#0 \/logs\/verifier\/test-stdout\.txt \(its last lines\):/);
      expect(section).toMatch(/#0 \| could not download uv/);
      expect(section).toMatch(/#0 the verifier had no network: .*--network host gives Harbor's default/);
      // Neither under the broken task (it forbids the internet; its test.sh wrote no file) nor the valid ones.
      const broken = show.stdout.slice(show.stdout.indexOf('broken  group'), show.stdout.indexOf('needs-network  group'));
      expect(broken).not.toMatch(/#0 \/logs\/verifier|no network/);
      // A dataset with no valid task is refused, naming every problem.
      const none = path.join(dir, 'none-valid');
      fs.mkdirSync(none);
      fs.cpSync(path.join(MIXED, 'bad-name'), path.join(none, 'bad-name'), { recursive: true });
      const refused = await polarE2e(['rollout', '--tasks', none, '--harness', 'oracle', '--samples', '1', '--environment', 'host', '--db', db]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/none of the 1 Harbor tasks in .* is valid/);
    },
    patient(300_000),
  );

  it.skipIf(!podman)(
    "polar tasks check --environment podman: an image that cannot be pulled offline is unverifiable, with the engine's reason and the way out",
    async () => {
      const r = await polarE2e(['tasks', 'check', MIXED, '--environment', 'podman', '--no-forge', '--json']);
      expect(r.code, r.stderr).toBe(1);
      const out = JSON.parse(r.stdout) as CheckJson;
      expect(verdicts(out)).toEqual({
        valid: 'valid',
        broken: 'broken',
        'bad-name': 'invalid',
        'bad-timeout': 'invalid',
        'needs-network': 'unverifiable',
        unpullable: 'unverifiable',
      });
      const pull = out.results.find((x) => x.task === 'unpullable')!;
      expect(pull.problems).toEqual([]);
      expect(pull.unverifiable).toHaveLength(1);
      expect(pull.unverifiable[0]).toMatch(
        /^neither the oracle nor nop could start: no network to pull python:3\.12-slim \(podman: .+\); `podman pull python:3\.12-slim`.*--environment host$/,
      );
      expect(out.results.find((x) => x.task === 'needs-network')!.unverifiable.join('\n')).toMatch(/--network host/);
    },
    patient(300_000),
  );
});
