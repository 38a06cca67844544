import path from 'node:path';
import { type Copy, DockerfileParser, type Dockerfile, type Instruction, ModifiableInstruction, type Variable } from 'dockerfile-ast';

// .dockerignore's rule lives with COPY's wildcards (dockerignore.ts); imported from here before.
export { dockerIgnored } from './dockerignore.js';

/**
 * What the host environment can take from a task's `environment/Dockerfile`: the files its COPY and
 * ADD lines put under the working directory, and that directory (the last WORKDIR). The base image
 * and the RUN steps are not reproduced on the host; they are listed so polar can say so. Pure.
 * Parsed by dockerfile-ast (the Docker language server's parser): `# escape=`, continuations,
 * heredocs, JSON and shell forms, flags, and which ARG or ENV value is in scope where.
 */
export interface DockerfilePlan {
  /** The image's working directory: the last WORKDIR, absolute; null when the file sets none. */
  workdir: string | null;
  /** FROM lines' images, in order (the last is the one the task runs in). */
  baseImages: string[];
  copies: DockerCopy[];
  /** RUN lines as written (on one line: continuations and heredoc bodies joined), and other lines the host skips. */
  skipped: string[];
  problems: { line: number; what: string }[];
}

export interface DockerCopy {
  line: number;
  /** Sources relative to the build context, ARG and ENV values substituted (no URLs: those are skipped). */
  sources: string[];
  /** The destination inside the image, absolute. */
  dest: string;
  /** Written with a trailing slash, or with several sources: a folder. */
  destIsDir: boolean;
}

export function readDockerfile(text: string, defaultWorkdir: string): DockerfilePlan {
  const plan: DockerfilePlan = { workdir: null, baseImages: [], copies: [], skipped: [], problems: [] };
  const df = DockerfileParser.parse(text);
  const args = argumentReader(df, text);
  let cwd = '/';
  for (const ins of df.getInstructions()) {
    const line = ins.getRange().start.line + 1;
    const op = ins.getKeyword();
    switch (op) {
      case 'FROM':
        plan.baseImages.push(args(ins).words[0] ?? '');
        // A later stage starts from its own image: what earlier stages copied is not in it.
        if (plan.baseImages.length > 1) {
          plan.copies = [];
          plan.workdir = null;
          cwd = '/';
        }
        break;
      case 'WORKDIR':
        cwd = path.posix.resolve(cwd, args(ins).text);
        plan.workdir = cwd;
        break;
      case 'COPY':
      case 'ADD': {
        const written = `${op} ${oneLine(ins)}`;
        if ((ins as ModifiableInstruction).getFlags().some((f) => f.getName() === 'from')) {
          plan.skipped.push(`${written}  (from another stage or image)`);
          break;
        }
        // Copy declares getHeredocs public; Add has the same parser method (protected in its type).
        if ((ins as unknown as Copy).getHeredocs().length > 0) {
          plan.skipped.push(`${written}  (a heredoc: written by the image build only)`);
          break;
        }
        const paths = args(ins).words;
        if (paths.length < 2) {
          plan.problems.push({ line, what: `${op} needs a source and a destination` });
          break;
        }
        const dest = paths[paths.length - 1]!;
        const sources = paths.slice(0, -1);
        if (sources.some((s) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s))) {
          plan.skipped.push(`${written}  (a URL: fetched by the image build only)`);
          break;
        }
        const destBase = dest.startsWith('/') ? dest : path.posix.join(cwd === '/' ? defaultWorkdir : cwd, dest);
        plan.copies.push({ line, sources, dest: path.posix.resolve(destBase), destIsDir: dest.endsWith('/') || sources.length > 1 || dest === '.' });
        break;
      }
      case 'RUN':
        plan.skipped.push(`RUN ${oneLine(ins)}`);
        break;
      default:
        // ENV, ARG, USER, EXPOSE, CMD…: the image's, not the files' (ARG and ENV are read as values).
        break;
    }
  }
  return plan;
}

/** An instruction as written, on one line (continuations and heredoc lines joined), for a notice. */
function oneLine(ins: Instruction): string {
  const flags = ins instanceof ModifiableInstruction ? ins.getFlags().map(String) : [];
  return [...flags, ins.getArgumentsContent() ?? ''].join(' ').replace(/\s+/g, ' ').trim();
}

/**
 * An instruction's arguments as the build reads them: each `$NAME` / `${NAME}` / `${NAME:-word}` /
 * `${NAME:+word}` replaced by the ARG or ENV value in scope where it stands (the parser says which:
 * `resolveVariable`), unset as empty; the JSON form (`["a", "b"]`) read as JSON, the shell form as
 * words without their quotes. Build arguments (`--build-arg`) are not polar's to give: an ARG
 * without a default is empty, as in a build that passes none (Harbor's).
 */
function argumentReader(df: Dockerfile, text: string): (ins: Instruction) => { text: string; words: string[] } {
  const lineStarts = [0];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lineStarts.push(i + 1);
  const offset = (p: ReturnType<Instruction['getRange']>['start']) => lineStarts[p.line]! + p.character;
  // A line continuation: the escape character (`# escape=` directive: \ or `) ending a line.
  const continuation = df.getEscapeCharacter() === '`' ? /`[ \t]*\r?\n/g : /\\[ \t]*\r?\n/g;
  return (ins) => {
    const args = ins.getArguments();
    if (args.length === 0) return { text: '', words: [] };
    const raw = (ins.getArgumentsContent() ?? '').trim();
    const json = raw.startsWith('[') && stringList(raw) !== null;
    const start = offset(args[0]!.getRange().start);
    const end = offset(args[args.length - 1]!.getRange().end);
    let out = '';
    let at = start;
    const variables = ins.getVariables().sort((a, b) => offset(a.getRange().start) - offset(b.getRange().start));
    for (const v of variables) {
      const from = offset(v.getRange().start);
      const to = offset(v.getRange().end);
      if (from < at || to > end) continue;
      const value = variableValue(df, v);
      out += text.slice(at, from) + (json ? JSON.stringify(value).slice(1, -1) : value);
      at = to;
    }
    const expanded = (out + text.slice(at, end)).replace(continuation, '').trim();
    if (json) return { text: expanded, words: stringList(expanded) ?? [] };
    return { text: unquote(expanded), words: expanded.split(/\s+/).filter(Boolean).map(unquote) };
  };
}

/** A variable's value where it stands, with its modifier (`:-` default, `:+` alternative). */
function variableValue(df: Dockerfile, v: Variable): string {
  const value = df.resolveVariable(v.getName(), v.getNameRange().start.line);
  const set = typeof value === 'string' && value !== '';
  const word = v.getSubstitutionParameter() ?? '';
  switch (v.getModifier()) {
    case '-':
      return set ? value : word;
    case '+':
      return set ? word : '';
    default:
      return value ?? '';
  }
}

/** A JSON list of strings, or null. */
function stringList(s: string): string[] | null {
  try {
    const parsed: unknown = JSON.parse(s);
    return Array.isArray(parsed) && parsed.every((p) => typeof p === 'string') ? parsed : null;
  } catch {
    return null;
  }
}

function unquote(s: string): string {
  return s.replace(/^(["'])(.*)\1$/s, '$2');
}
