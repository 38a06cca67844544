/** The sandbox moved to src/sandbox/; this keeps imports of its old home working. */
export { findBwrap, type SandboxKind } from '../sandbox/index.js';
