import path from 'node:path';
import { type Jail, openJail } from '../sandbox/index.js';
import { recordsUnder } from './hidden-records.js';
import { activeSandbox, type RunHarnessOptions } from './options.js';
import type { PreparedRun } from './prepare.js';

/**
 * The jail a run's harness starts in: a Harbor task's container, or a bubblewrap sandbox over the
 * working directory and the run's private home; none when the run is unsandboxed. `socketPath`: the
 * Unix socket a proxy-only sandbox reaches the proxy through when the caller gave none.
 */
export async function openHarnessJail(opts: RunHarnessOptions, run: PreparedRun, proxyUrl: string, socketPath: string | undefined): Promise<Jail | undefined> {
  const sandboxed = activeSandbox(opts);
  if (!sandboxed) return undefined;
  const proxyPort = () => Number(new URL(proxyUrl).port || 80);
  if (sandboxed.container) return sandboxed.container(proxyPort());
  const socket = sandboxed.proxySocket ?? socketPath;
  // A Node runtime polar gives the harness: at its own path, or beside polar's moved install.
  const nodePrefix = run.nodeDir ? path.dirname(run.nodeDir) : null;
  const nodeInside = nodePrefix && sandboxed.polarInside ? path.posix.join(sandboxed.polarInside, 'node') : null;
  return openJail(sandboxed.settings, {
    cwd: opts.cwd,
    home: run.home,
    network: sandboxed.network,
    ...(sandboxed.network === 'proxy-only' ? { proxy: { port: proxyPort(), socket: socket! } } : {}),
    // The Node runtime a harness needs beyond polar's, and a harness binary given by path.
    readOnly: [...(nodePrefix && !nodeInside ? [nodePrefix] : []), ...(opts.harnessBin ? [run.bin] : []), ...(sandboxed.readOnly ?? [])],
    interactive: opts.prompt === null,
    findCappedFiles: true,
    ...(sandboxed.cwdInside ? { cwdInside: sandboxed.cwdInside } : {}),
    ...(sandboxed.homeInside ? { homeInside: sandboxed.homeInside } : {}),
    ...(sandboxed.binds || nodeInside
      ? { binds: [...(nodeInside ? [{ source: nodePrefix!, dest: nodeInside, readOnly: true }] : []), ...(sandboxed.binds ?? [])] }
      : {}),
    ...(sandboxed.polarInside ? { polarInside: sandboxed.polarInside } : {}),
    ...(sandboxed.tz ? { tz: sandboxed.tz } : {}),
    hidden: recordsUnder(opts.cwd, opts.dbPath),
  });
}
