/**
 * Where two rendered first prompts part, as a short unified excerpt: the lines around the first
 * difference, each sample's differing lines marked `-` and `+`. A whole Claude Code prompt is ~50 kB;
 * the reader needs the one line that names a path or a date. Null when the texts are equal.
 */
export function firstDifference(a: string, b: string, labels: [string, string] = ['sample 1', 'sample 2'], context = 2): string | null {
  if (a === b) return null;
  const la = a.split('\n');
  const lb = b.split('\n');
  let start = 0;
  while (start < la.length && start < lb.length && la[start] === lb[start]) start++;
  // The common tail, not reaching back past the first difference on either side.
  let tail = 0;
  while (tail < la.length - start && tail < lb.length - start && la[la.length - 1 - tail] === lb[lb.length - 1 - tail]) tail++;
  const changedA = la.slice(start, la.length - tail);
  const changedB = lb.slice(start, lb.length - tail);
  const before = la.slice(Math.max(0, start - context), start);
  const after = la.slice(la.length - tail, la.length - tail + context);
  const MAX_LINES = 6;
  const shown = (lines: string[], mark: string) => [
    ...lines.slice(0, MAX_LINES).map((l) => `${mark}${clip(l)}`),
    ...(lines.length > MAX_LINES ? [`${mark}… (${lines.length - MAX_LINES} more lines)`] : []),
  ];
  return [
    `--- ${labels[0]}`,
    `+++ ${labels[1]}`,
    `@@ line ${start + 1} @@`,
    ...before.map((l) => ` ${clip(l)}`),
    ...shown(changedA, '-'),
    ...shown(changedB, '+'),
    ...after.map((l) => ` ${clip(l)}`),
  ].join('\n');
}

/** A long line cut to what fits a terminal's few rows. */
function clip(line: string, max = 240): string {
  return line.length > max ? `${line.slice(0, max)}… (${line.length} chars)` : line;
}
