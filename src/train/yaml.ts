/**
 * The YAML polar writes (NeMo-RL and NeMo Gym configs) and the YAML it reads (the config NeMo Gym
 * hands an agent server in NEMO_GYM_CONFIG_DICT, which is PyYAML's block-style dump of an OmegaConf
 * config). Not a general YAML library: block mappings and sequences, plain / single- / double-quoted
 * scalars (folded over several lines as PyYAML wraps them), `|` and `>` block scalars, empty and
 * simple flow collections, comments. Anchors, tags and multi-document streams are refused.
 */
export type Yaml = null | boolean | number | string | Yaml[] | { [key: string]: Yaml };

// ---------------------------------------------------------------- writing

export function toYaml(value: Yaml, indent = 0): string {
  const pad = ' '.repeat(indent);
  if (Array.isArray(value)) {
    if (value.length === 0) return `${pad}[]\n`;
    return value
      .map((item) => {
        if (isMap(item) && Object.keys(item).length > 0) {
          const body = toYaml(item, indent + 2);
          return `${pad}- ${body.slice(indent + 2)}`;
        }
        if (Array.isArray(item) && item.length > 0) return `${pad}-\n${toYaml(item, indent + 2)}`;
        return `${pad}- ${scalar(item)}\n`;
      })
      .join('');
  }
  if (isMap(value)) {
    const keys = Object.keys(value);
    if (keys.length === 0) return `${pad}{}\n`;
    return keys
      .map((key) => {
        const v = value[key]!;
        const k = plainKey(key);
        if ((isMap(v) && Object.keys(v).length > 0) || (Array.isArray(v) && v.length > 0)) return `${pad}${k}:\n${toYaml(v, indent + 2)}`;
        return `${pad}${k}: ${scalar(v)}\n`;
      })
      .join('');
  }
  return `${pad}${scalar(value)}\n`;
}

function scalar(v: Yaml): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean' || typeof v === 'number') return String(v);
  if (Array.isArray(v)) return '[]';
  if (isMap(v)) return '{}';
  return needsQuotes(v) ? JSON.stringify(v) : v;
}

function plainKey(k: string): string {
  return /^[A-Za-z_][\w.-]*$/.test(k) ? k : JSON.stringify(k);
}

function needsQuotes(s: string): boolean {
  if (s === '' || /^\s|\s$/.test(s)) return true;
  if (/^(null|~|true|false|yes|no|on|off)$/i.test(s)) return true;
  if (/^[-+]?(\d[\d_]*)?(\.\d*)?([eE][-+]?\d+)?$/.test(s) || /^0[xo]/i.test(s) || /^[-+]?\.(inf|nan)$/i.test(s)) return true;
  if (/^[-?:,[\]{}#&*!|>'"%@`]/.test(s)) return true;
  return /: |\s#|[\n\t]|:$/.test(s);
}

function isMap(v: Yaml | undefined): v is { [key: string]: Yaml } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---------------------------------------------------------------- reading

interface Line {
  indent: number;
  text: string;
  no: number;
}

export function parseYaml(source: string): Yaml {
  const lines: Line[] = [];
  source.split(/\r?\n/).forEach((raw, i) => {
    if (/^\s*(#.*)?$/.test(raw) || raw === '---') return;
    if (raw.startsWith('...')) return;
    const indent = raw.length - raw.trimStart().length;
    lines.push({ indent, text: raw.slice(indent), no: i + 1 });
  });
  const parser = new Parser(lines, source.split(/\r?\n/));
  if (lines.length === 0) return null;
  const value = parser.block(lines[0]!.indent);
  if (parser.pos < lines.length) throw parser.error(lines[parser.pos]!, 'unexpected content');
  return value;
}

class Parser {
  pos = 0;
  constructor(
    private readonly lines: Line[],
    private readonly raw: string[],
  ) {}

  error(line: Line, what: string): Error {
    return new Error(`YAML line ${line.no}: ${what}`);
  }

  block(indent: number): Yaml {
    const first = this.lines[this.pos]!;
    if (first.text.startsWith('- ') || first.text === '-') return this.sequence(indent);
    if (keyOf(first.text) !== null) return this.mapping(indent);
    return this.scalarLines(indent);
  }

  private mapping(indent: number): Yaml {
    const out: { [key: string]: Yaml } = {};
    while (this.pos < this.lines.length) {
      const line = this.lines[this.pos]!;
      if (line.indent < indent) break;
      if (line.indent > indent) throw this.error(line, 'bad indentation');
      const kv = keyOf(line.text);
      if (!kv) break;
      this.pos++;
      out[kv.key] = this.valueAfter(kv.rest, line, indent);
    }
    return out;
  }

  private sequence(indent: number): Yaml {
    const out: Yaml[] = [];
    while (this.pos < this.lines.length) {
      const line = this.lines[this.pos]!;
      if (line.indent !== indent || !(line.text.startsWith('- ') || line.text === '-')) break;
      const rest = line.text === '-' ? '' : line.text.slice(2);
      if (rest.trim() === '') {
        this.pos++;
        out.push(this.nested(indent));
        continue;
      }
      // "- - x" opens a sequence inside the sequence, two columns in.
      if (rest.startsWith('- ') || rest === '-') {
        this.lines[this.pos] = { indent: indent + 2, text: rest, no: line.no };
        out.push(this.sequence(indent + 2));
        continue;
      }
      // "- key: value" opens a mapping whose keys sit two columns in.
      if (keyOf(rest) !== null && !/^["']/.test(rest)) {
        this.lines[this.pos] = { indent: indent + 2, text: rest, no: line.no };
        out.push(this.mapping(indent + 2));
        continue;
      }
      this.pos++;
      out.push(this.inline(rest, line, indent));
    }
    return out;
  }

  private valueAfter(rest: string, line: Line, indent: number): Yaml {
    const text = stripComment(rest).trim();
    if (text === '') return this.nested(indent);
    if (/^[|>][-+]?$/.test(text)) return this.blockScalar(text, indent);
    return this.inline(rest, line, indent);
  }

  /** What follows a key or dash with nothing on its line: a deeper block, or null. */
  private nested(indent: number): Yaml {
    const next = this.lines[this.pos];
    if (!next) return null;
    // PyYAML writes a sequence under a key at the key's own indentation.
    if (next.indent > indent || (next.indent === indent && (next.text.startsWith('- ') || next.text === '-'))) return this.block(next.indent);
    return null;
  }

  /** A scalar or flow collection, joined with any continuation lines (PyYAML folds long scalars). */
  private inline(rest: string, line: Line, indent: number): Yaml {
    let text = rest.trim();
    const quote = text[0] === '"' || text[0] === "'" ? text[0] : null;
    if (quote) {
      if (!closes(text, quote)) text = this.foldQuoted(text, quote, line);
      return unquote(text, quote, line, this);
    }
    text = stripComment(text).trim();
    while (this.pos < this.lines.length) {
      const next = this.lines[this.pos]!;
      if (next.indent <= indent || keyOf(next.text) !== null || next.text.startsWith('- ')) break;
      text += ` ${stripComment(next.text).trim()}`;
      this.pos++;
    }
    return plain(text, line, this);
  }

  /**
   * A quoted scalar continued over raw lines (blank ones included), folded as YAML folds flow
   * scalars: a line break between text becomes a space, each empty line a newline; in double
   * quotes a trailing backslash joins lines with nothing.
   */
  private foldQuoted(first: string, quote: string, line: Line): string {
    let text = first.trimEnd();
    let blanks = 0;
    let no = line.no;
    for (;;) {
      if (no >= this.raw.length) throw this.error(line, 'unterminated quoted string');
      const raw = this.raw[no]!;
      no++;
      const part = raw.trim();
      if (part === '') {
        blanks++;
        continue;
      }
      // In double quotes the newline is written escaped, for JSON.parse to read back.
      if (blanks > 0) text += (quote === '"' ? '\\n' : '\n').repeat(blanks);
      else if (quote === '"' && text.endsWith('\\') && !text.endsWith('\\\\')) text = text.slice(0, -1);
      else text += ' ';
      blanks = 0;
      text += part;
      if (closes(text, quote)) break;
    }
    while (this.pos < this.lines.length && this.lines[this.pos]!.no <= no) this.pos++;
    return text;
  }

  private blockScalar(header: string, indent: number): Yaml {
    const start = this.lines[this.pos];
    if (!start || start.indent <= indent) return '';
    const body: string[] = [];
    const firstNo = start.no;
    let lastNo = firstNo;
    while (this.pos < this.lines.length && this.lines[this.pos]!.indent >= start.indent) {
      lastNo = this.lines[this.pos]!.no;
      this.pos++;
    }
    for (let no = firstNo; no <= lastNo; no++) body.push((this.raw[no - 1] ?? '').slice(start.indent));
    const keep = header.endsWith('+');
    const strip = header.endsWith('-');
    let text = header[0] === '|' ? body.join('\n') : body.join('\n').replace(/([^\n])\n(?=[^\n ])/g, '$1 ');
    if (strip) text = text.replace(/\n+$/, '');
    else if (!keep) text = `${text.replace(/\n+$/, '')}\n`;
    return text;
  }

  private scalarLines(indent: number): Yaml {
    const line = this.lines[this.pos]!;
    this.pos++;
    return this.inline(line.text, line, indent - 1);
  }
}

/** `key: rest` at the start of a line (the key plain or quoted), else null. */
function keyOf(text: string): { key: string; rest: string } | null {
  const quoted = /^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*')\s*:(?:\s|$)(.*)$/.exec(text);
  if (quoted) return { key: quoted[1]![0] === '"' ? (JSON.parse(quoted[1]!) as string) : quoted[1]!.slice(1, -1).replace(/''/g, "'"), rest: quoted[2] ?? '' };
  const plainKey = /^([^\s"'#\-[\]{},&*!|>%@`][^:#]*?|-[^\s:#][^:#]*?)\s*:(?:\s|$)(.*)$/.exec(text);
  if (!plainKey) return null;
  return { key: plainKey[1]!, rest: plainKey[2] ?? '' };
}

function closes(text: string, quote: string): boolean {
  if (quote === "'") {
    const inner = text.slice(1);
    return /^(?:[^']|'')*'\s*(#.*)?$/.test(inner);
  }
  return /^"(?:[^"\\]|\\.)*"\s*(#.*)?$/.test(text);
}

function unquote(text: string, quote: string, line: Line, p: Parser): Yaml {
  const body = stripComment(text).trim();
  if (quote === "'") return body.slice(1, -1).replace(/''/g, "'");
  try {
    return JSON.parse(body.replace(/\\x([0-9a-fA-F]{2})/g, '\\u00$1').replace(/\\ /g, ' ').replace(/\\\//g, '/')) as string;
  } catch {
    throw p.error(line, `cannot read the string ${body.slice(0, 40)}`);
  }
}

function plain(text: string, line: Line, p: Parser): Yaml {
  if (text.startsWith('&') || text.startsWith('*') || text.startsWith('!')) throw p.error(line, 'anchors, aliases and tags are not supported');
  if (text.startsWith('[') || text.startsWith('{')) return flow(text, line, p);
  if (/^(null|~|Null|NULL)$/.test(text) || text === '') return null;
  if (/^(true|True|TRUE)$/.test(text)) return true;
  if (/^(false|False|FALSE)$/.test(text)) return false;
  if (/^[-+]?\d+$/.test(text)) return Number(text);
  if (/^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$/.test(text)) return Number(text);
  if (/^[-+]?\.(inf|Inf|INF)$/.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  if (/^\.(nan|NaN|NAN)$/.test(text)) return NaN;
  return text;
}

/** Flow collections as PyYAML writes them for short values: [a, b], {a: 1}, nested. */
function flow(text: string, line: Line, p: Parser): Yaml {
  let i = 0;
  const ws = () => {
    while (i < text.length && /\s/.test(text[i]!)) i++;
  };
  const item = (): Yaml => {
    ws();
    const c = text[i];
    if (c === '[') {
      i++;
      const out: Yaml[] = [];
      for (ws(); text[i] !== ']'; ws()) {
        out.push(item());
        ws();
        if (text[i] === ',') i++;
        else if (text[i] !== ']') throw p.error(line, 'bad flow sequence');
      }
      i++;
      return out;
    }
    if (c === '{') {
      i++;
      const out: { [key: string]: Yaml } = {};
      for (ws(); text[i] !== '}'; ws()) {
        const key = item();
        ws();
        if (text[i] !== ':') throw p.error(line, 'bad flow mapping');
        i++;
        out[String(key)] = item();
        ws();
        if (text[i] === ',') i++;
        else if (text[i] !== '}') throw p.error(line, 'bad flow mapping');
      }
      i++;
      return out;
    }
    if (c === '"' || c === "'") {
      const end = c === '"' ? /^"(?:[^"\\]|\\.)*"/.exec(text.slice(i)) : /^'(?:[^']|'')*'/.exec(text.slice(i));
      if (!end) throw p.error(line, 'bad quoted string');
      i += end[0].length;
      return unquote(end[0], c, line, p);
    }
    const m = /^[^,\]}:]*(?::(?!\s)[^,\]}:]*)*/.exec(text.slice(i))!;
    i += m[0].length;
    return plain(m[0].trim(), line, p);
  };
  const value = item();
  ws();
  if (i < text.length) throw p.error(line, 'unexpected text after a flow collection');
  return value;
}

function stripComment(text: string): string {
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      if (i === 0 || /\s|[[{,:]/.test(text[i - 1]!)) quote = c;
    } else if (c === '#' && (i === 0 || /\s/.test(text[i - 1]!))) {
      return text.slice(0, i);
    }
  }
  return text;
}
