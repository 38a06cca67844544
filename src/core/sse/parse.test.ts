import { describe, expect, it } from 'vitest';
import { SseParseError, SseParser, type SseEvent } from './parse.js';
import { formatSseComment, formatSseEvent } from './write.js';

const enc = new TextEncoder();

function parseAll(chunks: (string | Uint8Array)[]): SseEvent[] {
  const parser = new SseParser();
  const events = chunks.flatMap((c) => parser.push(c));
  return [...events, ...parser.end()];
}

/** Every way of cutting `text` into two chunks must parse the same. */
function everySplit(text: string): SseEvent[][] {
  const bytes = enc.encode(text);
  const out: SseEvent[][] = [];
  for (let i = 0; i <= bytes.length; i++) out.push(parseAll([bytes.slice(0, i), bytes.slice(i)]));
  return out;
}

describe('SseParser', () => {
  it('parses data, event and id fields and dispatches on a blank line', () => {
    expect(parseAll(['event: message_start\nid: 7\ndata: {"a":1}\n\n'])).toEqual([{ event: 'message_start', id: '7', data: '{"a":1}' }]);
  });

  it('joins multi-line data with \\n and strips one leading space only', () => {
    expect(parseAll(['data:  two spaces\ndata:none\n\n'])).toEqual([{ data: ' two spaces\nnone' }]);
  });

  it('accepts CR, LF and CRLF line endings, including a CRLF split across chunks', () => {
    const expected = [{ data: 'a' }, { data: 'b' }, { data: 'c' }];
    expect(parseAll(['data: a\r\n\r\ndata: b\r\rdata: c\n\n'])).toEqual(expected);
    for (const result of everySplit('data: a\r\n\r\ndata: b\r\rdata: c\n\n')) expect(result).toEqual(expected);
  });

  it('decodes a UTF-8 character split across chunks whole', () => {
    for (const result of everySplit('data: 日本語 🚀\n\n')) expect(result).toEqual([{ data: '日本語 🚀' }]);
  });

  it('skips a leading BOM, reports comments, ignores unknown fields', () => {
    const comments: string[] = [];
    const parser = new SseParser({ onComment: (c) => comments.push(c) });
    const events = parser.push(new Uint8Array([0xef, 0xbb, 0xbf, ...enc.encode(': ping\nfoo: bar\ndata: x\n\n')]));
    expect(events).toEqual([{ data: 'x' }]);
    expect(comments).toEqual([' ping']);
  });

  it('discards an unterminated event at end of stream (per spec)', () => {
    expect(parseAll(['data: done\n\ndata: partial'])).toEqual([{ data: 'done' }]);
  });

  it('an event with no data is not dispatched', () => {
    expect(parseAll(['event: ping\n\ndata: x\n\n'])).toEqual([{ data: 'x' }]);
  });

  it('refuses an event over the size cap instead of buffering without bound', () => {
    const parser = new SseParser({ maxEventBytes: 64 });
    expect(() => parser.push(`data: ${'x'.repeat(100)}`)).toThrow(SseParseError);
    const lines = new SseParser({ maxEventBytes: 64 });
    expect(() => lines.push('data: 0123456789\n'.repeat(10))).toThrow(SseParseError);
  });
});

describe('formatSseEvent', () => {
  it('round-trips through the parser, multi-line data included', () => {
    const events: SseEvent[] = [{ event: 'content_block_delta', data: '{"x":1}' }, { data: 'line1\nline2\r\nline3' }, { id: '3', data: '' }];
    const text = events.map(formatSseEvent).join('');
    expect(parseAll([text])).toEqual([events[0], { data: 'line1\nline2\nline3' }, { id: '3', data: '' }]);
  });

  it('refuses line breaks in event and id (they would inject fields)', () => {
    expect(() => formatSseEvent({ event: 'a\ndata: evil', data: 'x' })).toThrow(TypeError);
    expect(() => formatSseEvent({ id: '1\r2', data: 'x' })).toThrow(TypeError);
  });

  it('comments are single lines that parsers ignore', () => {
    expect(formatSseComment('keep\nalive')).toBe(': keep alive\n\n');
    expect(parseAll([formatSseComment('x'), 'data: y\n\n'])).toEqual([{ data: 'y' }]);
  });
});
