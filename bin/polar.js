#!/usr/bin/env node
// Thin launcher: the CLI lives in dist/ (built by `npm run build`).
import { main } from '../dist/cli/index.js';

main(process.argv).catch((err) => {
  console.error(err instanceof Error ? err.stack ?? err.message : String(err));
  process.exitCode = 1;
});
