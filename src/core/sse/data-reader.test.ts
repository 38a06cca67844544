import { describe, expect, it } from 'vitest';
import { SseDataReader } from './data-reader.js';
import { SseParser } from './parse.js';

/** What the text parser dispatches, as the byte reader should: each event's data. */
function viaParser(chunks: Buffer[]): string[] {
  const parser = new SseParser();
  return chunks.flatMap((c) => parser.push(c).map((e) => e.data));
}

function viaReader(chunks: Buffer[]): string[] {
  const reader = new SseDataReader();
  return chunks.flatMap((c) => reader.push(c).map((d) => d.toString('utf8')));
}

const STREAMS = [
  'data: {"a":1}\n\ndata: [DONE]\n\n',
  'data: {"a":1}\r\n\r\ndata:{"b":"café 日本語 🚀"}\r\rdata: [DONE]\r\n\r\n',
  '\uFEFFdata: first\n\n',
  ': keep-alive\nevent: message\nid: 7\nretry: 10\ndata: one\ndata:  two\ndata\n\n',
  // fields that only start like `data`, and `data` with nothing after it
  'datum: x\ndata2: y\ndat: z\nDATA: w\ndata:\n\ndata\n\ndata:no-space\n\n',
  // LF-only lines, then a CR ending further on (the reader checks each read for CRs once)
  'data: a\n\ndata: b\n\ndata: c\r\n\r\n',
  'data: {"x":"a:b"}\n\n: comment only\n\nevent: ping\n\ndata: tail without blank line',
  `data: {"prompt_token_ids":[${Array.from({ length: 5000 }, (_, i) => i * 7).join(',')}]}\n\ndata: {"z":"é"}\n\n`,
];

describe('SseDataReader', () => {
  it('gives the same event data as the text parser, however the bytes are split', () => {
    for (const text of STREAMS) {
      const bytes = Buffer.from(text, 'utf8');
      const whole = viaParser([bytes]);
      expect(whole.length).toBeGreaterThan(0);
      expect(viaReader([bytes])).toEqual(whole);
      const step = bytes.length > 2000 ? 997 : 1;
      for (let cut = 1; cut < bytes.length; cut += step) {
        const chunks = [bytes.subarray(0, cut), bytes.subarray(cut)];
        expect(viaReader(chunks)).toEqual(whole);
      }
      // byte by byte: every CR/LF pair and multi-byte character split
      if (bytes.length < 2000) expect(viaReader([...bytes].map((b) => Buffer.from([b])))).toEqual(whole);
    }
  });

  it('refuses an event larger than its limit', () => {
    const reader = new SseDataReader(64);
    expect(() => reader.push(Buffer.from(`data: ${'x'.repeat(100)}`))).toThrow(/larger than 64 bytes/);
  });
});
