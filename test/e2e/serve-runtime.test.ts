import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockServer, startMockServer } from '../../src/mock-server/server.js';
import { DEMO_FILE } from '../../src/mock-server/script.js';
import { workingEngines } from '../../src/rollout/environments/choose.js';
import { taskStatusProblems } from '../../src/serve/contract/polar-models.js';
import { bwrapProblem, findBwrap } from '../../src/sandbox/index.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { type Json, serveClient, slimeRequest } from './serve-support.js';
import { expectSessionCapturedExactly, startPolarServer } from './support.js';

/**
 * A TaskRequest with a `runtime` (Polar's RuntimeSpec: a docker image, its workdir, env and prepare
 * steps) and the `harbor` evaluator (tests_dir), served by `polar serve --environment podman|docker`:
 * the session runs in the image, where the prepare steps' work is, and the verifier grades what the
 * agent left there. Skipped, saying why, where no engine works. The image is CI's offline
 * `debian:12-slim` (.ci/podman).
 */
const engine = workingEngines()[0] ?? null;
const bwrap = findBwrap();
const skip = engine === null ? 'no container engine works here' : bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
const STRICT = { polarEmits: true, publicRelease: true };
let mock: MockServer;
let dir: string;
let url = '';
let db: string;
const children: ChildProcess[] = [];
const { post, settled } = serveClient(() => url);

beforeAll(async () => {
  if (skip) return;
  mock = await startMockServer();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-serve-runtime-'));
  db = path.join(dir, 'polar.db');
  const tests = path.join(dir, 'files', 'tests');
  fs.mkdirSync(tests, { recursive: true });
  // The reward needs the agent's file in the workdir and what the prepare steps put in the image.
  fs.writeFileSync(
    path.join(tests, 'test.sh'),
    [
      's=0',
      `[ -s /polar/session/workspace/${DEMO_FILE} ] && [ "$(cat /polar/session/workspace/seed.txt)" = "seed $GREETING" ] && [ "$(cat /opt/upload.txt)" = uploaded ] && s=1`,
      'mkdir -p /logs/verifier && echo $s > /logs/verifier/reward.txt',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(path.join(dir, 'files', 'upload.txt'), 'uploaded\n');
  // What a submitter must not reach: a file of this machine outside --runtime-files.
  fs.writeFileSync(path.join(dir, 'secret.txt'), 'polar serve secret\n');
  const args = ['serve', '--port', '0', '--json', '--upstream', mock.url, '--upstream-kind', 'vllm-tito', '--tokenizer', 'bundled:qwen3'];
  const { json } = await startPolarServer(
    [...args, '--db', db, '--out', path.join(dir, 'out'), '--environment', engine!, '--runtime-files', path.join(dir, 'files')],
    children,
  );
  url = json.url as string;
}, patient(60_000));

afterAll(async () => {
  // serve cancels what runs and closes its boxes before it exits: no container is left.
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          const timer = setTimeout(resolve, patient(30_000));
          c.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
        }),
    ),
  );
  await mock?.close();
  if (dir) removeTree(dir);
});

const runtimeRequest = (taskId: string, testsDir: string, upload = 'upload.txt'): Json =>
  slimeRequest(null, taskId, {
    num_samples: 1,
    runtime: {
      backend: 'docker',
      image: 'debian:12-slim',
      workdir: '/polar/session/workspace',
      env: { GREETING: 'hello' },
      prepare: [
        { type: 'exec', command: 'mkdir -p /polar/session/workspace && echo "seed $GREETING" > /polar/session/workspace/seed.txt' },
        { type: 'upload_file', source: upload, target: '/opt/upload.txt' },
      ],
      allow_internet: false,
    },
    evaluator: { strategy: 'harbor', config: { tests_dir: testsDir, verifier_timeout: 60 } },
  });

describe.skipIf(skip !== null)(`polar serve: a runtime image and the harbor evaluator${skip ? ` (skipped: ${skip})` : ` (${engine})`}`, () => {
  it("runs the session in the image its prepare steps built, graded by the task's tests there", { timeout: patient(300_000) }, async () => {
    expect((await post(runtimeRequest('in-runtime', 'tests'))).status).toBe(200);
    const s = await settled('in-runtime');
    expect(taskStatusProblems(s, STRICT)).toEqual([]);
    const r = s.results[0] as Json;
    expect(r, JSON.stringify(r.error)).toMatchObject({ status: 'COMPLETED', error: null });
    expect(r.trajectory.traces).toHaveLength(1);
    expect(r.trajectory.traces[0].reward).toBe(1);
    expect(expectSessionCapturedExactly(db, r.session_id, mock)).toBeGreaterThanOrEqual(2);
  });

  it("a request reads files only under --runtime-files: a missing tests_dir, and serve's own files, are refused by name", async () => {
    const missing = await post(runtimeRequest('no-tests', 'missing'));
    expect(missing.status).toBe(400);
    expect(missing.body.detail[0]).toMatchObject({
      loc: ['body', 'evaluator', 'config', 'tests_dir'],
      msg: expect.stringMatching(/not a folder on this machine/),
    });
    for (const source of [path.join(dir, 'secret.txt'), '../secret.txt', db]) {
      const outside = await post(runtimeRequest('steal', 'tests', source));
      expect(outside.status, source).toBe(400);
      expect(outside.body.detail[0]).toMatchObject({ loc: ['body', 'runtime', 'prepare', 1, 'source'], msg: expect.stringMatching(/outside --runtime-files/) });
    }
    fs.symlinkSync(path.join(dir, 'secret.txt'), path.join(dir, 'files', 'link.txt'));
    expect((await post(runtimeRequest('via-link', 'tests', 'link.txt'))).body.detail[0].msg).toMatch(/outside --runtime-files/);
    const env = await post({
      ...runtimeRequest('env', 'tests'),
      evaluator: { strategy: 'harbor', config: { tests_dir: 'tests' }, env: { K: '${POLAR_UPSTREAM_API_KEY}' } },
    });
    expect(env.body.detail[0]).toMatchObject({ loc: ['body', 'evaluator', 'env', 'K'] });
  });
});
