import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/**
 * A path for the capture proxy's Unix socket, in a fresh 0700 folder (mkdtemp's mode) so only this
 * user reaches it from the host; a sandbox gets it by a bind mount. Short: sun_path holds 107 bytes.
 */
export async function privateSocketPath(): Promise<{ path: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'polar-px-'));
  return { path: path.join(dir, 'proxy.sock'), remove: () => rm(dir, { recursive: true, force: true }) };
}
