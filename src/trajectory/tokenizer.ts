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
  const json = JSON.parse(fs.readFileSync(jsonFile, 'utf8')) as { decoder?: { type?: string } };
  const tokenizer = new Tokenizer(json, config);
  const special = new Set<number>();
  const added = new Set<number>();
  for (const [id, token] of tokenizer.get_added_tokens_decoder()) {
    added.add(id);
    if (token.special) special.add(id);
  }
  const decode = (ids: readonly number[]) => tokenizer.decode([...ids], { skip_special_tokens: false });
  const byteLevel = json.decoder?.type === 'ByteLevel' ? byteLevelTable() : null;
  return {
    decode,
    isSpecial: (id) => special.has(id),
    piece: (id) => {
      const token = byteLevel && !added.has(id) ? tokenizer.id_to_token(id) : undefined;
      if (token === undefined) return decode([id]);
      const bytes = Uint8Array.from([...token], (ch: string) => byteLevel!.get(ch) ?? 0x3f);
      return utf8WithEscapes(bytes);
    },
  };
}

/** GPT-2's byte-level alphabet inverted: each printable stand-in character → the byte it encodes. */
function byteLevelTable(): Map<string, number> {
  const bytes: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bytes.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bytes.push(b);
  for (let b = 0xae; b <= 0xff; b++) bytes.push(b);
  const table = new Map<string, number>();
  for (const b of bytes) table.set(String.fromCharCode(b), b);
  let next = 0;
  for (let b = 0; b < 256; b++) if (!bytes.includes(b)) table.set(String.fromCharCode(256 + next++), b);
  return table;
}

const UTF8 = new TextDecoder('utf-8', { fatal: false });

/** Bytes as text: each well-formed UTF-8 sequence as its character, every other byte as \xNN. */
export function utf8WithEscapes(bytes: Uint8Array): string {
  let out = '';
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    const len = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    let ok = len > 0 && i + len <= bytes.length;
    for (let k = 1; ok && k < len; k++) ok = (bytes[i + k]! & 0xc0) === 0x80;
    if (ok) {
      const ch = UTF8.decode(bytes.subarray(i, i + len));
      if (!ch.includes('\uFFFD')) {
        out += ch;
        i += len;
        continue;
      }
    }
    out += `\\x${b.toString(16).padStart(2, '0')}`;
    i++;
  }
  return out;
}
