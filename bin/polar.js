#!/usr/bin/env node
// Thin launcher: the CLI lives in dist/, built by `npm install` / `npm ci` (prepare) or `npm run build`.
// `npx polar` in the checkout never builds it (scripts/prepare.mjs says why), so say what to run here.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/cli/index.js', import.meta.url);
if (!existsSync(entry)) {
  const checkout = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
  console.error(`polar is not built yet: run \`npm install\` in ${checkout} (it installs and builds dist/), then this command again.`);
  process.exit(1);
}
const { main } = await import(entry.href);
main(process.argv).catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exitCode = 1;
});
