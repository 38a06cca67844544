export type { NetworkMode, SandboxKind, SandboxLimits, SandboxSettings } from './types.js';
export { DEFAULT_LIMITS } from './types.js';
export { bwrapProblem, findBwrap, requireBwrap } from './find.js';
export { checkWorkdir, openJail, type Jail, type JailSpec } from './jail.js';
export type { Bind } from './args.js';
export { fileSizeUlimit, formatBytes, parseSize, rlimitReason } from './limits.js';
export { sandboxNotices } from './notices.js';
export { privateSocketPath } from './socket.js';
export { startRelay } from './relay.js';
