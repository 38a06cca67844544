/**
 * Turns a model's raw output text back into a reply, incrementally, for upstreams that return
 * tokens rather than parsed messages (token-in/token-out): reasoning in `<think>…</think>`, text,
 * and tool calls in `<tool_call>…</tool_call>` — Hermes/Qwen3 JSON (`{"name": …, "arguments": {…}}`)
 * or Qwen3-Coder XML (`<function=NAME><parameter=P>value</parameter></function>`).
 *
 * Text arrives in pieces (decoded from streamed ids), so a piece that ends inside a possible tag
 * (`<tool_` …) is held back until the next piece says what it is. Reasoning and text stream as they
 * come; a tool call is emitted whole when its closing tag arrives (its arguments are a JSON object,
 * not a string that can be cut anywhere). The newline a template puts before `<tool_call>` is not
 * part of the text (the template adds it again when it renders the turn).
 */
export type ToolCallFormat = 'hermes' | 'qwen3-coder';

export interface ParsedToolCall {
  index: number;
  id: string;
  name: string;
  /** JSON text of the arguments object. */
  arguments: string;
}

export interface ParsedDelta {
  reasoning?: string;
  content?: string;
  toolCalls?: ParsedToolCall[];
}

export interface OutputParserOptions {
  format: ToolCallFormat;
  /** The output starts inside reasoning (the template put `<think>` in the prompt). */
  startsInReasoning?: boolean;
  /** Tool-call ids: `${idPrefix}${index}`. */
  idPrefix: string;
}

const TAGS = ['<think>', '</think>', '<tool_call>', '</tool_call>'] as const;
type Mode = 'start' | 'reasoning' | 'content' | 'tool';

export class OutputParser {
  private mode: Mode;
  private pending = '';
  private tool = '';
  /** The newlines dropped before the open tool call, restored if it turns out not to be one. */
  private toolLead = '';
  private calls = 0;
  private contentSeen = false;
  /** Trailing newlines not yet known to be text (a tag may follow, whose framing they are). */
  private heldNewlines = '';
  /** Newlines right after `<think>` or `</think>` are the template's framing, not text. */
  private skipLeadingNewlines = false;

  constructor(private readonly options: OutputParserOptions) {
    this.mode = options.startsInReasoning ? 'reasoning' : 'start';
  }

  get toolCallCount(): number {
    return this.calls;
  }

  push(text: string): ParsedDelta {
    const out: ParsedDelta = {};
    this.pending += text;
    for (;;) {
      const at = this.pending.indexOf('<');
      if (at < 0) {
        this.emit(out, this.pending);
        this.pending = '';
        return out;
      }
      this.emit(out, this.pending.slice(0, at));
      this.pending = this.pending.slice(at);
      const tag = TAGS.find((t) => this.pending.startsWith(t));
      if (tag) {
        this.pending = this.pending.slice(tag.length);
        this.onTag(tag, out);
        continue;
      }
      // Could still become a tag: wait for more text. Otherwise it is a plain '<'.
      if (TAGS.some((t) => t.startsWith(this.pending))) return out;
      this.emit(out, '<');
      this.pending = this.pending.slice(1);
    }
  }

  /** The end of the output: whatever was held back is text (or an unfinished tool call's text). */
  end(): ParsedDelta {
    const out: ParsedDelta = {};
    this.emit(out, this.pending);
    this.pending = '';
    if (this.mode === 'tool') {
      // A tool call cut short (length) is not a call: its text is content, as the model wrote it.
      const cut = `${this.toolLead}<tool_call>${this.tool}`;
      this.tool = '';
      this.mode = 'content';
      this.append(out, 'content', cut);
    }
    if (this.heldNewlines) {
      this.append(out, this.mode === 'reasoning' ? 'reasoning' : 'content', this.heldNewlines);
      this.heldNewlines = '';
    }
    return out;
  }

  private onTag(tag: (typeof TAGS)[number], out: ParsedDelta): void {
    if (tag === '<think>' && (this.mode === 'start' || this.mode === 'content') && !this.contentSeen) {
      this.mode = 'reasoning';
      this.heldNewlines = '';
      this.skipLeadingNewlines = true;
    } else if (tag === '</think>' && this.mode === 'reasoning') {
      this.mode = 'content';
      this.heldNewlines = '';
      this.skipLeadingNewlines = true;
    } else if (tag === '<tool_call>' && this.mode !== 'reasoning' && this.mode !== 'tool') {
      this.toolLead = this.heldNewlines; // the template's newline before a tool call is markup, not text
      this.heldNewlines = '';
      this.mode = 'tool';
      this.tool = '';
    } else if (tag === '</tool_call>' && this.mode === 'tool') {
      const call = parseToolCall(this.tool, this.options.format);
      if (call) {
        (out.toolCalls ??= []).push({ index: this.calls, id: `${this.options.idPrefix}${this.calls}`, ...call });
        this.calls++;
      } else {
        this.append(out, 'content', `${this.toolLead}<tool_call>${this.tool}</tool_call>`);
      }
      this.tool = '';
      this.mode = 'content';
    } else {
      this.emit(out, tag); // a tag where it means nothing is text
    }
  }

  private emit(out: ParsedDelta, text: string): void {
    if (!text) return;
    if (this.mode === 'tool') {
      this.tool += text;
      return;
    }
    let t = text;
    if (this.skipLeadingNewlines) {
      t = t.replace(/^\n+/, '');
      if (!t) return;
      this.skipLeadingNewlines = false;
    }
    if (this.mode === 'start') this.mode = 'content';
    const field = this.mode === 'reasoning' ? 'reasoning' : 'content';
    // Trailing newlines are held: they are text unless a tag follows.
    const m = /\n+$/.exec(t);
    const body = m ? t.slice(0, m.index) : t;
    if (body) {
      this.append(out, field, this.heldNewlines + body);
      this.heldNewlines = '';
      if (field === 'content') this.contentSeen = true;
    }
    if (m) this.heldNewlines += m[0];
  }

  private append(out: ParsedDelta, field: 'reasoning' | 'content', text: string): void {
    out[field] = (out[field] ?? '') + text;
  }
}

function parseToolCall(body: string, format: ToolCallFormat): { name: string; arguments: string } | null {
  const text = body.trim();
  if (format === 'hermes' || text.startsWith('{')) {
    try {
      const call = JSON.parse(text) as { name?: unknown; arguments?: unknown };
      if (typeof call.name !== 'string') return null;
      const args = typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {});
      return { name: call.name, arguments: args };
    } catch {
      return null;
    }
  }
  const fn = /^<function=([^>\n]+)>([\s\S]*?)<\/function>$/.exec(text);
  if (!fn) return null;
  const args: Record<string, unknown> = {};
  for (const p of fn[2]!.matchAll(/<parameter=([^>\n]+)>\n?([\s\S]*?)\n?<\/parameter>/g)) {
    const raw = p[2]!;
    try {
      args[p[1]!] = JSON.parse(raw);
    } catch {
      args[p[1]!] = raw;
    }
  }
  return { name: fn[1]!.trim(), arguments: JSON.stringify(args) };
}
