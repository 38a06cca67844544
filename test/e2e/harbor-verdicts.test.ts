import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { polarE2e } from './support.js';
import { patient, patientSeconds } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Verdicts that mean one thing each (issue 41, item 3), through the real CLI on the host
 * environment: a task polar could not run as written here (its agent user, a separate verifier's
 * image, a build-time `git clone`, a GPU) is `unverifiable`, naming what, and never broken, even
 * where its oracle missed on the host (before, the first three were BROKEN: oracle 0). A multi-step
 * task whose steps carry keys Harbor's StepConfig ignores (`dependencies`, `inherit_prior_session`)
 * runs (before, it was invalid).
 */
const bwrap = findBwrap();
const noSandbox = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
let dir: string;
const secs = patientSeconds(60);
const reward = (test: string) => `#!/bin/bash\nif ${test}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n`;

function task(name: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    const file = path.join(dir, 'suite', name, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
  }
}

/** A one-step task writing 42 to /app/answer.txt, with these files over it. */
function answerTask(name: string, toml: string, files: Record<string, string> = {}): void {
  task(name, {
    // [agent] comes last, so a toml ending in [agent] adds its timeout there.
    'task.toml': `version = "1.0"\n${toml.replace(/\[agent\]\n[^[]*$/, '')}\n[verifier]\ntimeout_sec = ${secs}.0\n[agent]\ntimeout_sec = ${secs}.0\n${/\[agent\]\n([^[]*)$/.exec(toml)?.[1] ?? ''}`,
    'instruction.md': 'Write 42 to /app/answer.txt.\n',
    'environment/Dockerfile': 'FROM debian:12-slim\nWORKDIR /app\n',
    'tests/test.sh': reward('[ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]'),
    'solution/solve.sh': '#!/bin/bash\necho 42 > /app/answer.txt\n',
    ...files,
  });
}

function threeSteps(): void {
  const step = (n: number, deps: string) =>
    `[[steps]]\nname = "s${n}"\n${deps}\n[steps.agent]\ntimeout_sec = ${secs}.0\n[steps.verifier]\ntimeout_sec = ${secs}.0\n`;
  const files: Record<string, string> = {
    'task.toml': `schema_version = "1.1"\n[task]\nname = "polar/three-steps"\n${step(1, '')}${step(2, 'dependencies = ["s1"]\ninherit_prior_session = true')}${step(3, 'dependencies = ["s1", "s2"]')}`,
    'environment/Dockerfile': 'FROM debian:12-slim\nWORKDIR /app\n',
  };
  for (const n of [1, 2, 3]) {
    files[`steps/s${n}/instruction.md`] = `Append the line ${n} to /app/log.txt.\n`;
    files[`steps/s${n}/solution/solve.sh`] = `#!/bin/bash\necho ${n} >> /app/log.txt\n`;
    files[`steps/s${n}/tests/test.sh`] = reward(`[ "$(tr '\\n' ' ' < /app/log.txt 2>/dev/null)" = "${[1, 2, 3].slice(0, n).join(' ')} " ]`);
  }
  task('three-steps', files);
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-e2e-verdicts-'));
  // Its verifier checks the file is the agent user's: the host runs the oracle as its own user.
  answerTask('agent-user', '[agent]\nuser = "agent"', {
    'environment/Dockerfile': 'FROM debian:12-slim\nRUN useradd -m agent\nWORKDIR /app\nRUN chown agent /app\n',
    'tests/test.sh': reward('[ "$(stat -c %U /app/answer.txt 2>/dev/null)" = agent ]'),
  });
  // Its verifier needs its own image's marker: the host runs it with this machine's tools.
  answerTask('separate-verifier', 'artifacts = ["/app/answer.txt"]\n[verifier.environment]\nnetwork_mode = "no-network"', {
    'tests/Dockerfile': 'FROM debian:12-slim\nCOPY test.sh /tests/test.sh\nRUN echo verifier > /etc/polar-verifier\n',
    'tests/test.sh': reward('[ "$(cat /etc/polar-verifier 2>/dev/null)" = verifier ] && [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]'),
  });
  // The oracle copies what the image build cloned: the host runs no RUN step.
  answerTask('git-clone', '', {
    'environment/Dockerfile': 'FROM debian:12-slim\nWORKDIR /app\nRUN git clone https://example.invalid/answers.git /app/lib\n',
    'solution/solve.sh': '#!/bin/bash\ncp /app/lib/ANSWER /app/answer.txt\n',
  });
  // Sound everywhere but on a machine without a GPU for it.
  answerTask('gpu', '[environment]\ngpus = 1');
  threeSteps();
});
afterAll(() => removeTree(dir));

interface CheckJson {
  ok: boolean;
  valid: string[];
  broken: string[];
  unverifiable: string[];
  invalid: string[];
  results: {
    task: string;
    verdict: string;
    problems: string[];
    unverifiable: string[];
    oracle: { reward: number | null; error: string | null } | null;
    nop: { reward: number | null } | null;
  }[];
}

describe.skipIf(noSandbox !== null)(`verdicts on the host${noSandbox ? ` (skipped: ${noSandbox})` : ''}`, () => {
  it(
    'a task the host could not run as written is unverifiable, naming what (agent user, separate verifier, build-time git clone, GPU), never broken; a 3-step task with dependencies keys runs',
    async () => {
      const r = await polarE2e(['tasks', 'check', path.join(dir, 'suite'), '--environment', 'host', '--no-forge', '--json']);
      const out = JSON.parse(r.stdout) as CheckJson;
      const get = (t: string) => out.results.find((x) => x.task === t)!;
      expect(out.broken, r.stderr).toEqual([]);
      expect(out.invalid).toEqual([]);
      expect(r.code).toBe(0);
      expect(out.unverifiable.sort()).toEqual(['agent-user', 'git-clone', 'gpu', 'separate-verifier']);
      expect(out.valid).toEqual(['three-steps']);
      expect(get('agent-user').unverifiable[0]).toMatch(
        /^\[agent\]\.user = "agent": the host environment runs the agent as this machine's user; --environment podman/,
      );
      expect(get('separate-verifier').unverifiable[0]).toMatch(
        /^its separate verifier environment \(environment_mode = "separate"\): .*not tests\/Dockerfile's image/,
      );
      expect(get('git-clone').unverifiable[0]).toMatch(
        /^environment\/Dockerfile fetches over the network while the image builds \(RUN git clone https:\/\/example\.invalid/,
      );
      expect(get('gpu').unverifiable.join('\n')).toMatch(/GPU \(\[environment\] gpus = 1\)/);
      // The host's runs missed where the task as written would not: said, as no evidence.
      for (const t of ['agent-user', 'separate-verifier', 'git-clone']) {
        expect(get(t).oracle!.reward, t).toBe(0);
        expect(get(t).problems, t).toEqual([]);
        expect(get(t).unverifiable.join('\n'), t).toMatch(/seen on a run not as written, so no evidence: the oracle .* earned 0/);
      }
      expect(get('three-steps')).toMatchObject({ oracle: { reward: 1, error: null }, nop: { reward: 0 } });

      // The text report says each verdict with its reason, and the keys ignored in a notice.
      const text = await polarE2e(['tasks', 'check', path.join(dir, 'suite'), '--environment', 'host', '--no-forge']);
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/^unverifiable gpu {2}oracle 1, nop 0\n {13}it needs a GPU/m);
      expect(text.stdout).toMatch(/^unverifiable agent-user {2}oracle 0, nop 0$/m);
      expect(text.stdout).not.toMatch(/BROKEN/);
      expect(text.stderr).toMatch(
        /notice: task three-steps: task\.toml, field "steps\[1\]\.dependencies": ignored, as Harbor's StepConfig ignores keys it does not define/,
      );
    },
    patient(300_000),
  );
});
