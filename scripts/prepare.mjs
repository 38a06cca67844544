// npm's `prepare`: builds dist/ after `npm install` / `npm ci` in the checkout (and before `npm pack`).
//
// npm also runs it on `npx polar` in the checkout: npm 11's `npm exec` sees that the project's own
// package.json has a `polar` bin, links the checkout into its npx cache (~/.npm/_npx/<hash>) and runs
// the link's `prepare` there, silently (libnpmexec lib/index.js, `hasPkgBin` → `npxArb.reify`). A
// rebuild there costs minutes on a loaded 2-core machine with nothing printed, and before `npm
// install` has run there is no `tsc`: the failed reify leaves the link without a package.json and
// every later `npx polar` in the checkout fails with ENOENT. So under `npm exec` this builds
// nothing: `npm install` built dist/ already, and bin/polar.js says what to run when it did not.
//
// An npx cache entry that an interrupted or failed `npx polar` left without its package.json is
// removed here on install, so `npm install && npx polar demo` always works again.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

if (process.env.npm_command === 'exec') process.exit(0);

repairNpxCache();
build();

/** npx's folder for this checkout: the first 16 hex digits of the sha512 of its absolute path. */
function npxEntry() {
  const cache = process.env.npm_config_cache;
  if (!cache) return null;
  const hash = createHash('sha512').update(root).digest('hex').slice(0, 16);
  return path.join(cache, '_npx', hash);
}

function repairNpxCache() {
  const entry = npxEntry();
  if (!entry || !existsSync(entry) || existsSync(path.join(entry, 'package.json'))) return;
  rmSync(entry, { recursive: true, force: true });
  console.error(`polar: removed ${entry}, an npx cache entry an interrupted \`npx polar\` left without its package.json`);
}

function build() {
  let tsc;
  try {
    tsc = createRequire(path.join(root, 'package.json')).resolve('typescript/bin/tsc');
  } catch {
    console.error('polar: typescript is not installed, so dist/ cannot be built: run `npm install` in the polar checkout');
    process.exit(1);
  }
  console.error('polar: building dist/ (tsc, under a minute on an idle machine)');
  const done = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
  process.exit(done.status ?? 1);
}
