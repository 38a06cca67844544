import fs from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { tokenizerPath } from '../core/bundled-tokenizer.js';
import { PolarError } from '../core/errors.js';
import type { TokenText } from './types.js';

/**
 * A Hugging Face tokenizer (tokenizer.json, with tokenizer_config.json beside it when present),
 * used only to explain breaks and decode examples: never to produce ids for training.
 */
export function loadTokenText(value: string): TokenText {
  const file = tokenizerPath(value);
  const jsonFile = fs.statSync(file, { throwIfNoEntry: false })?.isDirectory() ? path.join(file, 'tokenizer.json') : file;
  if (!fs.existsSync(jsonFile)) throw new PolarError('POLAR_USAGE', `--tokenizer ${file}: no tokenizer.json there`);
  const configFile = path.join(path.dirname(jsonFile), 'tokenizer_config.json');
  const config = fs.existsSync(configFile) ? JSON.parse(fs.readFileSync(configFile, 'utf8')) : {};
  const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(jsonFile, 'utf8')), config);
  const special = new Set<number>();
  for (const [id, token] of tokenizer.get_added_tokens_decoder()) if (token.special) special.add(id);
  return {
    decode: (ids) => tokenizer.decode([...ids], { skip_special_tokens: false }),
    isSpecial: (id) => special.has(id),
  };
}
