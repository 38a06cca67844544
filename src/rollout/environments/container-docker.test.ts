import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll } from 'vitest';
import { dockerApi } from '../../../test/support/docker-api.js';
import { bwrapProblem, findBwrap } from '../../sandbox/index.js';
import { BOX_PROVIDERS } from '../boxes/registry.js';
import { boxEnvironment } from './box/index.js';
import { describeEnvironment, describeSeparateVerifier } from './environment.cases.js';
import { patient } from '../../../test/support/patience.js';

/**
 * The SampleEnvironment suite through docker's CLI: against a docker daemon where one answers, else
 * against podman's Docker-compatible API (no docker daemon runs on CI's machines). docker's `cp`,
 * `exec` exit codes and `--init` are its own, whatever serves the API.
 */
const api = dockerApi();
const bwrap = findBwrap();
// A docker daemon's own store, or podman's where podman serves the API.
const hasImage = () =>
  ['docker', 'podman'].some((bin) => {
    try {
      execFileSync(bin, ['image', 'inspect', 'debian:12-slim'], { stdio: 'ignore', timeout: patient(30_000) });
      return true;
    } catch {
      return false;
    }
  });
const skip = api.skip ?? (bwrap === null ? 'bubblewrap is not installed' : (bwrapProblem(bwrap) ?? (hasImage() ? null : 'no debian:12-slim image')));
let saved: string | undefined;

beforeAll(async () => {
  if (skip !== null) return;
  saved = process.env.DOCKER_HOST;
  Object.assign(process.env, await api.start());
}, patient(60_000));
afterAll(() => {
  if (saved === undefined) delete process.env.DOCKER_HOST;
  else process.env.DOCKER_HOST = saved;
  api.stop();
});

describeEnvironment('docker', { skip, bwrap, open: boxEnvironment(BOX_PROVIDERS.docker) });
describeSeparateVerifier('docker', { skip, bwrap, open: boxEnvironment(BOX_PROVIDERS.docker), fromImage: true });
