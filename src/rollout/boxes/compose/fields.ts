import { refusal } from './interpolate.js';

/** A YAML mapping (plain object) or null. */
export function mapping(value: unknown): Record<string, unknown> | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

export function text(value: unknown, where: string): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw refusal(where, `expected a string, got ${describe(value)}`);
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'a mapping' : `${typeof value} ${JSON.stringify(value)}`;
}

const UNIT_SEC: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };

/** A compose duration (Go's time.ParseDuration, as compose-go reads it): "2s", "1m30s", "1.5s", "500ms". */
export function durationSec(value: unknown, where: string): number {
  const s = typeof value === 'string' ? value.trim() : null;
  if (s === null) throw refusal(where, `expected a duration string such as "2s" or "1m30s", got ${describe(value)}`);
  if (s === '0') return 0;
  const part = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let at = 0;
  while (at < s.length) {
    part.lastIndex = at;
    const m = part.exec(s);
    if (!m) throw refusal(where, `"${s}" is not a duration (such as "2s", "1m30s", "500ms")`);
    total += Number(m[1]) * (UNIT_SEC[m[2] as string] as number);
    at = part.lastIndex;
  }
  if (s === '') throw refusal(where, 'an empty duration');
  return total;
}

/**
 * `command` / `entrypoint`: a list is the argv; a string is split as compose-go splits it
 * (go-shellwords: blanks separate words, quotes and backslashes group them, no shell runs). A
 * string using shell operators (`;`, `&`, `|`, `<`, `>`, `` ` ``, `$(`) is refused: compose would not
 * run a shell for it; write `["sh", "-c", "…"]`.
 */
export function argv(value: unknown, where: string): string[] {
  if (Array.isArray(value)) return value.map((v, i) => text(v, `${where}[${i}]`));
  return splitWords(text(value, where), where);
}

function splitWords(s: string, where: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < s.length; i += 1) {
    const c = s[i] as string;
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (c === '\\' && i + 1 < s.length && (quote === null || '"\\$`'.includes(s[i + 1] as string))) {
      word = (word ?? '') + s[i + 1];
      i += 1;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      word = word ?? '';
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else if (';&|<>`'.includes(c) || (c === '$' && s[i + 1] === '(')) {
      throw refusal(
        where,
        `\`${c}\` in a string command is a shell operator compose would not run a shell for: write it as a list, ["sh", "-c", ${JSON.stringify(s)}]`,
      );
    } else word = (word ?? '') + c;
  }
  if (quote !== null) throw refusal(where, `an unclosed ${quote} in ${JSON.stringify(s)}`);
  if (word !== null) words.push(word);
  return words;
}

/**
 * `environment`: a map (`KEY: value`; numbers and booleans as their text) or a list (`KEY=value`).
 * A bare `KEY` (or `KEY:` with no value) takes compose's own variable of that name (Harbor's
 * compose variables, interpolate.ts); unset there, the box does not get it, as compose leaves it out.
 */
export function environment(value: unknown, vars: Readonly<Record<string, string>>, where: string): Record<string, string> {
  const env: Record<string, string> = {};
  const put = (key: string, v: string | null) => {
    if (!/^[^=\s]+$/.test(key)) throw refusal(where, `${JSON.stringify(key)} is not a variable name`);
    const resolved = v ?? vars[key];
    if (resolved !== undefined) env[key] = resolved;
  };
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      const s = text(item, `${where}[${i}]`);
      const eq = s.indexOf('=');
      put(eq < 0 ? s : s.slice(0, eq), eq < 0 ? null : s.slice(eq + 1));
    });
    return env;
  }
  const map = mapping(value);
  if (!map) throw refusal(where, `expected a list or a mapping, got ${describe(value)}`);
  for (const [key, v] of Object.entries(map)) put(key, v === null ? null : text(v, `${where}.${key}`));
  return env;
}

/** `a b` → `'a' 'b'` for sh. */
export function shellQuote(words: readonly string[]): string {
  return words.map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(' ');
}
