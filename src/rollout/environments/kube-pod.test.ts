import { execFileSync } from 'node:child_process';
import { kubePodProvider } from '../../../test/support/boxes/kube-pod-provider.js';
import { bwrapProblem, findBwrap } from '../../sandbox/index.js';
import { boxEnvironment } from './box/index.js';
import { describeEnvironment } from './environment.cases.js';

// A third engine is one provider file (test/support/boxes/kube-pod-provider.ts: pods through
// `podman kube play`) and the one line below. The image is debian:12-slim, as container.test.ts's.
const bwrap = findBwrap();
const hasImage = () => {
  try {
    execFileSync('podman', ['image', 'inspect', 'debian:12-slim'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const skip =
  kubePodProvider.probe() ??
  (bwrap === null
    ? 'bubblewrap is not installed (polar’s git on the collected workspace runs in it)'
    : !hasImage()
      ? 'podman has no debian:12-slim image'
      : bwrapProblem(bwrap));

describeEnvironment('kube-pod', { skip, bwrap, open: boxEnvironment(kubePodProvider) });
