import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { polarE2e } from './support.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Two of issue 32's task shapes through `polar tasks check --environment podman`, built on the local
 * debian:12-slim (as .ci/podman makes it): Harbor's separate verifier (its image from
 * tests/Dockerfile, only the artifact carried across) and a reward.json of metrics only (named by
 * --reward-key). Each must be valid: the oracle earns the top reward, nop earns nothing.
 */
const podman = workingEngines().includes('podman');
let dir: string;

function task(name: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    const file = path.join(dir, 'suite', name, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
  }
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-shapes-'));
  task('separate', {
    'task.toml': `version = "1.0"\nartifacts = ["/app/answer.txt"]\n[verifier]\ntimeout_sec = ${patientSeconds(60)}.0\nenvironment_mode = "separate"\n[agent]\ntimeout_sec = ${patientSeconds(60)}.0\n`,
    'instruction.md': 'Write 42 to /app/answer.txt.\n',
    'environment/Dockerfile': 'FROM debian:12-slim\nWORKDIR /app\n',
    // The verifier's own image: /tests is its, and a marker only it has.
    'tests/Dockerfile': 'FROM debian:12-slim\nCOPY test.sh /tests/test.sh\nRUN echo verifier > /etc/polar-verifier\n',
    'tests/test.sh':
      '#!/bin/bash\n[ "$(cat /etc/polar-verifier)" = verifier ] && [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
    'solution/solve.sh': '#!/bin/bash\necho 42 > /app/answer.txt\n',
  });
  task('metrics', {
    'task.toml': `version = "1.0"\n[verifier]\ntimeout_sec = ${patientSeconds(60)}.0\n[agent]\ntimeout_sec = ${patientSeconds(60)}.0\n`,
    'instruction.md': 'Write ok to /app/out.txt.\n',
    'environment/Dockerfile': 'FROM debian:12-slim\nWORKDIR /app\n',
    // Metrics only, no "reward" key: Harbor reads each field as a metric.
    'tests/test.sh':
      '#!/bin/bash\nif [ "$(cat /app/out.txt 2>/dev/null)" = ok ]; then a=1; else a=0; fi\necho "{\\"accuracy\\": $a, \\"style\\": 0.5}" > /logs/verifier/reward.json\n',
    'solution/solve.sh': '#!/bin/bash\necho ok > /app/out.txt\n',
  });
});
afterAll(() => removeTree(dir));

interface Check {
  results: { task: string; verdict: string; oracle: { reward: number | null } | null; nop: { reward: number | null } | null }[];
}

describe.skipIf(!podman)(`issue 32's task shapes in podman${podman ? '' : ' (skipped: `podman info` fails here)'}`, () => {
  it(
    'a separate-verifier task and a metrics-only reward.json task are valid: oracle at the top reward, nop 0',
    async () => {
      const r = await polarE2e(['tasks', 'check', path.join(dir, 'suite'), '--environment', 'podman', '--no-forge', '--reward-key', 'accuracy', '--json']);
      const check = JSON.parse(r.stdout) as Check;
      const by = new Map(check.results.map((t) => [t.task, t]));
      for (const name of ['separate', 'metrics']) {
        const t = by.get(name);
        expect(t?.verdict, `${name}: ${r.stderr}\n${r.stdout}`).toBe('valid');
        expect(t?.oracle?.reward).toBe(1);
        expect(t?.nop?.reward).toBe(0);
      }
      expect(r.code).toBe(0);
    },
    patient(300_000),
  );
});
