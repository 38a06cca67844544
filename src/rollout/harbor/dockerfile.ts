import path from 'node:path';

/**
 * What the host environment can take from a task's `environment/Dockerfile`: the files its COPY and
 * ADD lines put under the working directory, and that directory (the last WORKDIR). The base image
 * and the RUN steps are not reproduced on the host; they are listed so polar can say so. Pure.
 */
export interface DockerfilePlan {
  /** The image's working directory: the last WORKDIR, absolute; null when the file sets none. */
  workdir: string | null;
  /** FROM lines' images, in order (the last is the one the task runs in). */
  baseImages: string[];
  copies: DockerCopy[];
  /** RUN lines as written (joined continuation lines), and other lines the host skips. */
  skipped: string[];
  problems: { line: number; what: string }[];
}

export interface DockerCopy {
  line: number;
  /** Sources relative to the build context, as written (no URLs: those are problems). */
  sources: string[];
  /** The destination inside the image, absolute. */
  dest: string;
  /** Written with a trailing slash, or with several sources: a folder. */
  destIsDir: boolean;
}

export function readDockerfile(text: string, defaultWorkdir: string): DockerfilePlan {
  const plan: DockerfilePlan = { workdir: null, baseImages: [], copies: [], skipped: [], problems: [] };
  let cwd = '/';
  for (const { line, text: instr } of logicalLines(text)) {
    const m = /^(\w+)\s*(.*)$/s.exec(instr);
    if (!m) continue;
    const op = m[1]!.toUpperCase();
    const rest = m[2]!.trim();
    switch (op) {
      case 'FROM':
        plan.baseImages.push(rest.split(/\s+/)[0] ?? rest);
        // A later stage starts from its own image: what earlier stages copied is not in it.
        if (plan.baseImages.length > 1) {
          plan.copies = [];
          plan.workdir = null;
          cwd = '/';
        }
        break;
      case 'WORKDIR': {
        cwd = path.posix.resolve(cwd, unquote(rest));
        plan.workdir = cwd;
        break;
      }
      case 'COPY':
      case 'ADD': {
        const args = splitArgs(rest);
        const flags = args.filter((a) => a.startsWith('--'));
        const paths = args.filter((a) => !a.startsWith('--'));
        if (flags.some((f) => f.startsWith('--from'))) {
          plan.skipped.push(`${op} ${rest}  (from another stage or image)`);
          break;
        }
        if (paths.length < 2) {
          plan.problems.push({ line, what: `${op} needs a source and a destination` });
          break;
        }
        const dest = paths[paths.length - 1]!;
        const sources = paths.slice(0, -1);
        const remote = sources.filter((s) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s));
        if (remote.length > 0) {
          plan.skipped.push(`${op} ${rest}  (a URL: fetched by the image build only)`);
          break;
        }
        const destBase = dest.startsWith('/') ? dest : path.posix.join(cwd === '/' ? defaultWorkdir : cwd, dest);
        plan.copies.push({ line, sources, dest: path.posix.resolve(destBase), destIsDir: dest.endsWith('/') || sources.length > 1 || dest === '.' });
        break;
      }
      case 'RUN':
        plan.skipped.push(`RUN ${rest}`);
        break;
      default:
        // ENV, USER, EXPOSE, CMD…: the image's, not the files'.
        break;
    }
  }
  return plan;
}

/**
 * Whether a path of the build context (relative, with `/`) is left out by .dockerignore's patterns:
 * the last pattern that matches it or a folder above it decides (`!` re-includes); `*` and `?` stay
 * within one path segment, `**` spans any.
 */
const GLOB: Record<string, string> = { '**/': '(?:.*/)?', '**': '.*', '*': '[^/]*', '?': '[^/]' };

export function dockerIgnored(rel: string, patterns: readonly string[]): boolean {
  let ignored = false;
  const parts = rel.split('/');
  for (const raw of patterns) {
    const negate = raw.startsWith('!');
    const pattern = path.posix.normalize((negate ? raw.slice(1) : raw).trim()).replace(/^\/+|\/+$/g, '');
    if (pattern === '' || pattern === '.') continue;
    const re = new RegExp(
      `^${pattern
        .split(/(\*\*\/?|\*|\?)/)
        .map((piece) => GLOB[piece] ?? piece.replace(/[.+^${}()|[\]\\]/g, '\\$&'))
        .join('')}$`,
    );
    for (let i = 1; i <= parts.length; i++) {
      if (re.test(parts.slice(0, i).join('/'))) {
        ignored = !negate;
        break;
      }
    }
  }
  return ignored;
}

/** Instructions with their first line number: comments dropped, backslash continuations joined. */
function logicalLines(text: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let current: string | null = null;
  let start = 0;
  text.split('\n').forEach((raw, i) => {
    const trimmed = raw.trim();
    if (current === null && (trimmed === '' || trimmed.startsWith('#'))) return;
    if (current !== null && trimmed.startsWith('#')) return;
    if (current === null) start = i + 1;
    const cont = trimmed.endsWith('\\');
    const piece = cont ? trimmed.slice(0, -1) : trimmed;
    current = current === null ? piece : `${current} ${piece}`;
    if (!cont) {
      out.push({ line: start, text: current.trim() });
      current = null;
    }
  });
  if (current !== null) out.push({ line: start, text: (current as string).trim() });
  return out;
}

/** COPY's arguments: the JSON form `["a", "b"]` or words separated by spaces. */
function splitArgs(rest: string): string[] {
  const flags: string[] = [];
  let body = rest;
  for (;;) {
    const f = /^(--\S+)\s+/.exec(body);
    if (!f) break;
    flags.push(f[1]!);
    body = body.slice(f[0].length);
  }
  if (body.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(body);
      if (Array.isArray(parsed) && parsed.every((p) => typeof p === 'string')) return [...flags, ...parsed];
    } catch {
      // not JSON: read as words
    }
  }
  return [...flags, ...body.split(/\s+/).filter(Boolean).map(unquote)];
}

function unquote(s: string): string {
  return s.replace(/^(["'])(.*)\1$/, '$2');
}
