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

/** What two first prompts differ in, named for the reader (describeDifference). */
export interface PromptDifference {
  /** "the date", "the time zone", "the OS version", "the hostname", "a path", else "the text". */
  field: string;
  /** Each side's differing part, as it reads there (a whole date, a whole path). */
  values: [string, string];
  /** The 1-based line (of the first text) where they part. */
  line: number;
  /** One line for a message: `the date ("2026-11-27" vs "2026-11-28", line 12)`. */
  summary: string;
}

const MONTH = '(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\\.?';
const WEEKDAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\\s+';
/** Dates as harnesses print them: 2026-11-27, 11/27/2026, Thursday, November 27, 2026, Thu Nov 27 2026, 27 November 2026. */
const DATE = new RegExp(
  [
    `\\d{4}-\\d{2}-\\d{2}(?:[T ]\\d{2}:\\d{2}(?::\\d{2}(?:\\.\\d+)?)?(?:Z|[+-]\\d{2}:?\\d{2})?)?`,
    `\\d{1,2}/\\d{1,2}/\\d{2,4}`,
    `(?:${WEEKDAY})?${MONTH}\\s+\\d{1,2}(?:st|nd|rd|th)?,?\\s+\\d{4}`,
    `(?:${WEEKDAY})?\\d{1,2}\\s+${MONTH},?\\s+\\d{4}`,
    '(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day',
  ].join('|'),
  'g',
);
/** A kernel or OS release: 6.1.0-18-amd64, Linux 6.8.0, Darwin 24.1.0. */
const OS_RELEASE = /\b(?:Linux|Darwin|Windows)\b[^\n]*\d|\b\d+\.\d+\.\d+-[\w.+-]+/;
/** Characters a word, a number or a path is made of (a difference is widened to whole ones). */
const WORD = /[^\s"'`<>()[\]{},;]/;

/**
 * What two rendered first prompts differ in, named: the first place they part, widened to whole
 * words (a whole path, a whole date), and what it is, judged from those words and their line ("the
 * date" for a group that ran across midnight, "the OS version" for workers on other kernels, "a
 * path" for an install or workspace path). Null when the texts are equal.
 */
export function describeDifference(a: string, b: string, labels: [string, string] = ['sample 1', 'sample 2']): PromptDifference | null {
  if (a === b) return null;
  const la = a.split('\n');
  const lb = b.split('\n');
  let start = 0;
  while (start < la.length && start < lb.length && la[start] === lb[start]) start++;
  const lineA = la[start] ?? '';
  const lineB = lb[start] ?? '';
  let from = 0;
  while (from < lineA.length && from < lineB.length && lineA[from] === lineB[from]) from++;
  let tail = 0;
  while (tail < lineA.length - from && tail < lineB.length - from && lineA[lineA.length - 1 - tail] === lineB[lineB.length - 1 - tail]) tail++;
  // Widened over the shared characters on both sides, so each side's value is a whole word.
  while (from > 0 && WORD.test(lineA[from - 1]!)) from--;
  while (tail > 0 && WORD.test(lineA[lineA.length - tail]!)) tail--;
  const span = (line: string): [number, number] => [from, line.length - tail];
  const values: [string, string] = [lineA.slice(...span(lineA)), lineB.slice(...span(lineB))];
  const dates = [datesAt(lineA, span(lineA)), datesAt(lineB, span(lineB))];
  let field = 'the text';
  let shown = values;
  const context = `${lineA}\n${lineB}`;
  if (dates[0] || dates[1]) {
    field = 'the date';
    shown = [dates[0] ?? values[0], dates[1] ?? values[1]];
  } else if (/time ?zone/i.test(context)) field = 'the time zone';
  else if (/\bOS\b|operating system|kernel|platform|uname/i.test(context) || values.some((v) => OS_RELEASE.test(v))) field = 'the OS version';
  else if (/host ?name/i.test(context)) field = 'the hostname';
  else if (values.some((v) => /(?:^|[=:])(?:\/|~\/)[^\s]*/.test(v))) field = 'a path';
  const quote = (s: string) => (s === '' ? '(nothing)' : JSON.stringify(clip(s, 120)));
  return {
    field,
    values: shown,
    line: start + 1,
    summary: `${field} (${labels[0]} ${quote(shown[0])}, ${labels[1]} ${quote(shown[1])}; line ${start + 1})`,
  };
}

/** The dates in `line` that overlap [from, to), joined; null when the span touches none. */
function datesAt(line: string, [from, to]: [number, number]): string | null {
  const hits = [...line.matchAll(DATE)].filter((m) => m.index! < Math.max(to, from + 1) && m.index! + m[0].length > from).map((m) => m[0]);
  return hits.length > 0 ? hits.join(' … ') : null;
}
