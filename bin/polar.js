#!/usr/bin/env node
// Thin launcher: the CLI lives in dist/, built by `npm ci` (prepare) or `npm run build`.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/cli/index.js', import.meta.url);
if (!existsSync(entry)) {
  console.error('polar is not built yet: run `npm ci` (or `npm run build`) in the polar checkout first.');
  process.exit(1);
}
const { main } = await import(entry.href);
main(process.argv).catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exitCode = 1;
});
