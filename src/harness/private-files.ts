import { chmod, mkdir, writeFile } from 'node:fs/promises';

/**
 * A run's harness config holds the session key and the proxy's address: directories are 0700 and
 * files 0600. The explicit chmod keeps that true when a directory or file already existed (a run
 * resumed under the same session), since mkdir and writeFile apply their mode only on creation.
 */
export async function privateDirs(...dirs: string[]): Promise<void> {
  for (const dir of dirs) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await chmod(dir, 0o700);
  }
}

export async function writePrivateFile(file: string, text: string): Promise<void> {
  await writeFile(file, text, { mode: 0o600 });
  await chmod(file, 0o600);
}
