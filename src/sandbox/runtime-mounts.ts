import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The harness's CLI and the Node runtime it and the bridge run on, read-only at their own paths:
 * the Node install prefix (its binary alone where that prefix is a system folder like /usr, which
 * would hide the image's own), and the node_modules polar sits in (the harness CLIs beside it).
 */
export function runtimeMounts(extra: readonly string[] = []): { source: string; dest: string; readOnly: true }[] {
  const polarModules = path.join(fileURLToPath(new URL('../../', import.meta.url)), 'node_modules');
  const paths = [nodePrefix(process.execPath), ...(fs.existsSync(polarModules) ? [polarModules] : []), ...extra];
  return [...new Set(paths)].map((p) => ({ source: p, dest: p, readOnly: true }));
}

/** What to mount for a Node binary: its install prefix, or the binary alone where that is a system folder. */
export function nodePrefix(nodeBin: string): string {
  const node = fs.realpathSync(nodeBin);
  const prefix = path.dirname(path.dirname(node));
  return ['/', '/usr', '/usr/local', '/bin', '/opt'].includes(prefix) ? node : prefix;
}
