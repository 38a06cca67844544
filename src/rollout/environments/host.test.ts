import { bwrapProblem, findBwrap } from '../../sandbox/index.js';
import { describeEnvironment, describeSeparateVerifier } from './environment.cases.js';
import { hostEnvironment } from './host.js';

const bwrap = findBwrap();
const skip = bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap);
describeEnvironment('host', { skip, bwrap, open: hostEnvironment });
describeSeparateVerifier('host', { skip, bwrap, open: hostEnvironment, fromImage: false });
