import { bwrapProblem, findBwrap } from '../../sandbox/index.js';
import { describeEnvironment } from './environment.cases.js';
import { hostEnvironment } from './host.js';

const bwrap = findBwrap();
describeEnvironment('host', { skip: bwrap === null ? 'bubblewrap is not installed' : bwrapProblem(bwrap), bwrap, open: hostEnvironment });
