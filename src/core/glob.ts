/** Whether `file` (relative, `/`-separated) matches any of the patterns (a plain path also covers everything under it). */
export function matchesGlob(file: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => globRegExp(p).test(file));
}

const compiled = new Map<string, RegExp>();

/** `**` any folders, `*` and `?` within a name; a plain path also covers everything under it. */
function globRegExp(pattern: string): RegExp {
  let re = compiled.get(pattern);
  if (re) return re;
  const p = pattern.replace(/^\.?\/+/, '').replace(/\/+$/, '');
  let out = '';
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    if (c === '*' && p[i + 1] === '*') {
      const slash = p[i + 2] === '/';
      out += slash ? '(?:.*/)?' : '.*';
      i += slash ? 2 : 1;
    } else if (c === '*') out += '[^/]*';
    else if (c === '?') out += '[^/]';
    else out += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  re = new RegExp(`^${out}(?:/.*)?$`);
  compiled.set(pattern, re);
  return re;
}
