import fs from 'node:fs';
import path from 'node:path';
import dockerignore from '@balena/dockerignore';

/**
 * The build context's one glob rule, moby's (patternmatcher, as `docker build` and podman's
 * buildah read .dockerignore): `*` and `?` within one path segment, `**` across any, `[…]` classes,
 * a pattern matching a folder matching all below it, the last matching pattern deciding, `!`
 * re-including. @balena/dockerignore is a port of that Go code, tested against `docker build`; polar
 * uses it for .dockerignore and for COPY's wildcard sources alike.
 */
type Matcher = ReturnType<typeof dockerignore.default>;
// A CommonJS module: its factory is module.exports, and module.exports.default too.
const ignore = dockerignore.default;

const matchers = new WeakMap<readonly string[], Matcher>();

function matcher(patterns: readonly string[]): Matcher {
  let m = matchers.get(patterns);
  if (!m) {
    m = ignore({ ignorecase: false }).add([...patterns]);
    matchers.set(patterns, m);
  }
  return m;
}

/**
 * .dockerignore's patterns as moby reads the file (ignorefile.ReadAll): a line starting with `#`
 * is a comment, blank lines are nothing, a UTF-8 byte-order mark is dropped. Kept as written (the
 * matcher trims them), so that `  #x` stays the pattern it is.
 */
export function readDockerignore(text: string): string[] {
  return text
    .replace(/^\uFEFF/, '')
    .split(/\r?\n/)
    .filter((l) => !l.startsWith('#') && l.trim() !== '');
}

/** Why .dockerignore's patterns cannot be used (a pattern the matcher cannot compile), or null. */
export function ignoreProblem(patterns: readonly string[]): string | null {
  for (const [i, p] of patterns.entries()) {
    try {
      ignore({ ignorecase: false }).add([p]).ignores('x');
    } catch (err) {
      return `pattern ${i + 1} (${JSON.stringify(p)}) is not a valid pattern: ${(err as Error).message}`;
    }
  }
  return null;
}

/** A pattern as moby cleans it (ignorefile.ReadAll): trimmed, `!` apart, path-cleaned, no leading `/`. */
function cleaned(raw: string): { pattern: string; exclusion: boolean } {
  let p = raw.trim();
  const exclusion = p.startsWith('!');
  if (exclusion) p = p.slice(1).trim();
  p = path.posix.normalize(p);
  if (p.length > 1 && p.startsWith('/')) p = p.slice(1);
  return { pattern: p, exclusion };
}

/**
 * Whether a path of the build context (relative, with `/`) is left out by .dockerignore's
 * patterns. A folder that is left out but that a `!` pattern re-includes something below is not:
 * the copy must go into it (moby's archive walk does the same: it skips a folder only when no
 * exclusion pattern starts with it); what it holds is then judged entry by entry.
 */
export function dockerIgnored(rel: string, patterns: readonly string[], isDir = false): boolean {
  if (patterns.length === 0 || rel === '') return false;
  if (!matcher(patterns).ignores(rel)) return false;
  if (!isDir) return true;
  const dir = `${rel}/`;
  return !patterns.some((raw) => {
    const { pattern, exclusion } = cleaned(raw);
    return exclusion && `${pattern}/`.startsWith(dir);
  });
}

/** Whether a COPY source is a wildcard pattern (moby: `*`, `?` or `[`). */
export function hasWildcard(source: string): boolean {
  return /[*?[]/.test(source);
}

/**
 * The entries of the build context a COPY wildcard source names, by the same rule as
 * .dockerignore (absolute paths, sorted): each entry the pattern matches itself, not those below
 * a matched folder (the folder is copied whole). Symlinked folders are not entered.
 */
export function contextGlob(context: string, source: string): string[] {
  const { pattern } = cleaned(source.replace(/^\.\//, ''));
  const m = ignore({ ignorecase: false }).add([pattern]);
  // Only as deep as the pattern has segments, unless `**` spans any.
  const depth = pattern.includes('**') ? Number.POSITIVE_INFINITY : pattern.split('/').length;
  const out: string[] = [];
  const walk = (dir: string, rel: string, level: number) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const r = rel === '' ? e.name : `${rel}/${e.name}`;
      if (m.ignores(r)) out.push(path.join(dir, e.name));
      else if (e.isDirectory() && level < depth) walk(path.join(dir, e.name), r, level + 1);
    }
  };
  walk(context, '', 1);
  return out;
}
