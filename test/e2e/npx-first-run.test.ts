// The README's first command is `npm install && npx polar demo`. npm 11's `npx polar` in a checkout
// links the checkout into its npx cache and runs the link's `prepare` (scripts/prepare.mjs says
// where). These run the real npm against a copy of the checkout's package files with a fresh npm
// cache, offline: the copy's node_modules and dist/ are this checkout's (what `npm install` made).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { patient } from '../support/patience.js';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');
const VERSION = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const dirs: string[] = [];

afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/**
 * A fresh checkout as far as npm can tell, before `npm install`: package.json, bin/, scripts/. No
 * tsconfig.build.json, so a `prepare` that builds fails loudly instead of writing into the linked dist/.
 */
function freshCheckout(): { dir: string; cache: string } {
  const top = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'polar-npx-')));
  dirs.push(top);
  const dir = path.join(top, 'polar');
  fs.mkdirSync(dir);
  for (const f of ['package.json', 'bin', 'scripts']) fs.cpSync(path.join(ROOT, f), path.join(dir, f), { recursive: true });
  return { dir, cache: path.join(top, 'npm-cache') };
}

/** What `npm install` leaves: dependencies installed and dist/ built (this checkout's, linked). */
function installed(dir: string): void {
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  fs.symlinkSync(path.join(ROOT, 'dist'), path.join(dir, 'dist'));
}

/** npm as a user runs it: none of the npm_* settings of the `npm test` this suite runs under, a fresh cache, offline. */
function npmEnv(cache: string): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  return { ...env, npm_config_cache: cache, npm_config_offline: 'true', npm_config_update_notifier: 'false', NO_COLOR: '1' };
}

async function npx(dir: string, cache: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  try {
    const { stdout, stderr } = await run(npm, ['exec', '--', 'polar', ...args], { cwd: dir, env: npmEnv(cache), timeout: patient(120_000) });
    return { code: 0, stdout, stderr, ms: Date.now() - started };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '', ms: Date.now() - started };
  }
}

/** npx's folder for a checkout: libnpmexec hashes the resolved directory (sha512, 16 hex digits). */
function npxEntry(cache: string, dir: string): string {
  return path.join(cache, '_npx', createHash('sha512').update(dir).digest('hex').slice(0, 16));
}

describe('the first `npx polar` in a checkout', () => {
  it('after `npm install`: runs polar without rebuilding dist/', { timeout: patient(180_000) }, async () => {
    const { dir, cache } = freshCheckout();
    installed(dir);
    const first = await npx(dir, cache, ['--version']);
    expect(first.stderr).not.toMatch(/npm error/);
    expect(first.code).toBe(0);
    expect(first.stdout.trim()).toBe(VERSION);
    // Not an assertion (speed lives in benchmarks): what the first line cost, for the log.
    console.log(`first npx polar --version after install: ${first.ms} ms`);
  });

  it('run before `npm install` says to run it, and leaves `npx polar` working once it has', { timeout: patient(180_000) }, async () => {
    const { dir, cache } = freshCheckout();
    const early = await npx(dir, cache, ['--version']);
    expect(early.code).not.toBe(0);
    expect(early.stderr).toContain(`polar is not built yet: run \`npm install\` in ${dir}`);
    expect(fs.existsSync(path.join(npxEntry(cache, dir), 'package.json'))).toBe(true);
    installed(dir);
    const later = await npx(dir, cache, ['--version']);
    expect(later.stderr).not.toMatch(/npm error/);
    expect(later.code).toBe(0);
    expect(later.stdout.trim()).toBe(VERSION);
  });

  it('`npm install` repairs the npx entry an interrupted `npx polar` left without its package.json', { timeout: patient(180_000) }, async () => {
    const { dir, cache } = freshCheckout();
    // What npm 11 left after a `prepare` that failed mid-reify: the link, and no package.json.
    const entry = npxEntry(cache, dir);
    fs.mkdirSync(path.join(entry, 'node_modules'), { recursive: true });
    fs.symlinkSync(path.relative(path.join(entry, 'node_modules'), dir), path.join(entry, 'node_modules', 'polar-rollout'));
    const broken = await npx(dir, cache, ['--version']);
    expect(broken.stderr).toMatch(/ENOENT[\s\S]*package\.json/);
    // `npm install`'s prepare, here without dependencies to build with: it repairs first, then says what is missing.
    const prepare = await run(npm, ['run', 'prepare'], { cwd: dir, env: npmEnv(cache) }).catch((e: { stderr: string }) => e);
    expect(prepare.stderr).toContain(`removed ${entry}`);
    expect(fs.existsSync(entry)).toBe(false);
    installed(dir);
    const later = await npx(dir, cache, ['--version']);
    expect(later.code).toBe(0);
    expect(later.stdout.trim()).toBe(VERSION);
  });
});
