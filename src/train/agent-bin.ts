import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface AgentBin {
  /** The polar launcher app.py execs, by its real path (no npm `.bin` link in between). */
  bin: string;
  /** Set when that launcher sits in npx's temporary cache: a run may outlive it. */
  warning: string | null;
}

/**
 * The polar that NeMo Gym starts as the agent, for app.py: this package's own launcher, wherever it
 * is installed. `process.argv[1]` is not it: under `npx polar` that is a link in npx's cache, and so
 * is the package itself. npm clears that cache when it likes (`npm cache clean`, another version of
 * the package), and a training run lasts hours, so a launcher there is named with a warning.
 */
export function agentBin(packageRoot: string = fileURLToPath(new URL('../../', import.meta.url))): AgentBin {
  const root = fs.realpathSync(packageRoot);
  const bin = path.join(root, 'bin', 'polar.js');
  if (!root.split(path.sep).includes('_npx')) return { bin, warning: null };
  return {
    bin,
    warning: `polar runs from npx's temporary cache (${root}), and app.py starts the agent from there: npm may clear that cache before or during training. Install polar where it stays and run that: \`npm i -g polar-rollout\`, or a clone with \`npm ci\` and its bin/polar.js`,
  };
}
