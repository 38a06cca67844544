import { realpathSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { baseEnvironment } from '../harness/env.js';
import { ensureNode } from '../harness/node-runtime.js';
import { resolveHarnessBin } from '../harness/resolve.js';
import { localStateDir } from '../store/postgres/url.js';
import type { RunHarnessOptions } from './options.js';

/** What a run needs before anything is opened or recorded: the binary, its environment, its folders. */
export interface PreparedRun {
  session: string;
  bin: string;
  /** The allow-listed environment the harness starts from. */
  baseEnv: Record<string, string>;
  /** The Node.js runtime's folder put first on the harness's PATH, when polar's own is not enough. */
  nodeDir: string | null;
  /** The private config directory (`.polar/runs/<session>/home`), made 0700. */
  home: string;
  logFile: string;
}

export async function prepareRun(opts: RunHarnessOptions, session: string): Promise<PreparedRun> {
  const { harness } = opts;
  const bin = await resolveHarnessBin(harness, opts.harnessBin, opts.cwd, opts.parentEnv?.PATH ?? process.env.PATH);
  const baseEnv = baseEnvironment(opts.parentEnv);
  const nodeDir = opts.nodeBin
    ? path.dirname(realpathSync(path.resolve(opts.nodeBin)))
    : harness.minNodeMajor
      ? await ensureNode(harness.minNodeMajor, harness.name, baseEnv, opts.onNotice)
      : null;
  if (nodeDir) baseEnv.PATH = [nodeDir, baseEnv.PATH].filter(Boolean).join(path.delimiter);

  const runDir = path.join(localStateDir(opts.dbPath), '.polar', 'runs', session);
  const home = path.join(runDir, 'home');
  await mkdir(home, { recursive: true, mode: 0o700 });
  return { session, bin, baseEnv, nodeDir, home, logFile: path.join(runDir, 'harness.log') };
}
