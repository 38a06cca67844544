import { execFileSync } from 'node:child_process';
import { bwrapProblem, findBwrap } from '../../sandbox/index.js';
import { workingEngines } from './choose.js';
import { BOX_PROVIDERS } from '../boxes/registry.js';
import { boxEnvironment } from './box/index.js';
import { describeEnvironment, describeSeparateVerifier } from './environment.cases.js';

// The suite's image is debian:12-slim, which CI makes offline (.ci/podman); no network to pull it.
const engine = workingEngines()[0] ?? null;
const bwrap = findBwrap();
const hasImage = (e: string) => {
  try {
    execFileSync(e, ['image', 'inspect', 'debian:12-slim'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const skip =
  engine === null
    ? 'no container engine works here (`docker info` and `podman info` fail)'
    : bwrap === null
      ? 'bubblewrap is not installed (polar’s git on the collected workspace runs in it)'
      : !hasImage(engine)
        ? `${engine} has no debian:12-slim image`
        : bwrapProblem(bwrap);
describeEnvironment(engine ?? 'container', { skip, bwrap, open: boxEnvironment(BOX_PROVIDERS[engine ?? 'podman']) });

describeSeparateVerifier(engine ?? 'container', { skip, bwrap, open: boxEnvironment(BOX_PROVIDERS[engine ?? 'podman']), fromImage: true });
