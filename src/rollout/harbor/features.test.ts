import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { containerOnlyFeatures, dockerfileEntrypoint, hostRefusal, hostUserNotice, readHealthcheck } from './features.js';
import { readHarborTasks } from './load.js';
import { hostNotices } from './trial.js';
import type { HarborTrial } from './types.js';

const FIXTURES = path.resolve(import.meta.dirname, '../../../fixtures/harbor-features');

function collect() {
  const problems: string[] = [];
  const ignored: string[] = [];
  const at = Object.assign((file: string, field: string | null, what: string) => problems.push(`${file} ${field}: ${what}`), {
    ignored: (field: string, model: string) => ignored.push(`${field} (${model})`),
  });
  return { problems, ignored, at };
}

describe('[environment.healthcheck] (config.py:250-278)', () => {
  it("takes Harbor's defaults for the fields not given", () => {
    const c = collect();
    expect(readHealthcheck({ command: 'curl -sf localhost:8080' }, 'environment.healthcheck', c.at)).toEqual({
      command: 'curl -sf localhost:8080',
      intervalSec: 5,
      timeoutSec: 30,
      startPeriodSec: 0,
      startIntervalSec: 5,
      retries: 3,
    });
    expect(c.problems).toEqual([]);
  });

  it('reports a missing command and a bad field by name; a key HealthcheckConfig does not define is ignored, as pydantic ignores it', () => {
    const c = collect();
    expect(readHealthcheck({ interval_sec: -1, retries: 0.5, every: 3 }, 'environment.healthcheck', c.at)).toBeUndefined();
    expect(c.problems.join('\n')).not.toMatch(/every/);
    expect(c.ignored).toEqual(['environment.healthcheck.every (HealthcheckConfig)']);
    expect(c.problems.join('\n')).toMatch(/environment\.healthcheck\.command: a shell command/);
    expect(c.problems.join('\n')).toMatch(/environment\.healthcheck\.interval_sec: seconds/);
    expect(c.problems.join('\n')).toMatch(/environment\.healthcheck\.retries: a whole number/);
  });
});

describe("the Dockerfile's ENTRYPOINT", () => {
  it("is the last stage's, across continued lines; ENTRYPOINT [] clears it", () => {
    expect(dockerfileEntrypoint('FROM a\nENTRYPOINT ["/x"]\nFROM b\nRUN true\n')).toBeNull();
    expect(dockerfileEntrypoint('FROM a\n# ENTRYPOINT ["/no"]\nentrypoint ["/start.sh", \\\n  "--serve"]\nCMD ["x"]\n')).toEqual({
      line: 3,
      value: '["/start.sh",    "--serve"]',
    });
    expect(dockerfileEntrypoint('FROM a\nENTRYPOINT ["/x"]\nENTRYPOINT []\n')).toBeNull();
  });
});

describe('what the host environment cannot run', () => {
  const [service] = readHarborTasks(path.join(FIXTURES, 'healthcheck-service'));

  it('a healthcheck and an ENTRYPOINT are read into the task, and the host refuses it by name with the way out', () => {
    const trial = service!.harbor!;
    expect(trial.healthcheck?.command).toBe('test -s /run/svc/answer');
    expect(trial.entrypoint).toMatch(/start-service\.sh.*line 6/);
    expect(containerOnlyFeatures(trial)).toHaveLength(2);
    expect(hostRefusal(trial)).toMatch(/^task polar\/healthcheck-service needs a container engine: --environment podman/);
    expect(hostNotices([service!]).join('\n')).toMatch(/needs a container engine/);
  });

  it("a compose environment is a container's: the host refuses it by name", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-features-compose-'));
    try {
      const trial = { name: 'o/compose', dir } as HarborTrial;
      expect(hostRefusal(trial)).toBeNull();
      fs.mkdirSync(path.join(dir, 'environment'));
      fs.writeFileSync(path.join(dir, 'environment', 'docker-compose.yaml'), 'services: {}\n');
      expect(hostRefusal(trial)).toMatch(/^task o\/compose needs a container engine: .*environment\/docker-compose\.yaml \(the services Harbor runs beside/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a task with neither runs on the host', () => {
    const plain = { ...service!.harbor!, healthcheck: undefined, entrypoint: undefined } as HarborTrial;
    expect(hostRefusal(plain)).toBeNull();
  });

  it('[agent].user and [verifier].user are named in a notice before the run: the host cannot apply them', () => {
    const trial = { ...service!.harbor!, agentUser: 'agent', verifierUser: '0' } as HarborTrial;
    expect(hostUserNotice(trial)).toMatch(/\[agent\]\.user = "agent" and \[verifier\]\.user = "0" not applied/);
    expect(hostNotices([{ ...service!, harbor: trial }]).join('\n')).toMatch(/\[agent\]\.user = "agent"/);
    expect(hostUserNotice(service!.harbor!)).toBeNull();
  });
});
