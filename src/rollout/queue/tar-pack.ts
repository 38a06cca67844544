import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * A deterministic tar (POSIX ustar, with pax records for long names) of a folder or one file, written
 * to `out` while its sha256 is taken: the same files give the same bytes, whatever machine, clock or
 * user packs them (entries in byte order of their names, owner 0, a fixed mtime, mode bits kept),
 * so the digest names the content and a task packed twice is stored once. Written here, not by the
 * system's tar: GNU tar's --sort=name is missing from the BSD tar of a macOS coordinator.
 *
 * Folders, regular files and symbolic links (kept verbatim, as fs.cp copies a workspace) are packed;
 * anything else (a socket, a FIFO) is left out and named in `skipped`. Hard links become copies.
 * Packing stops with TooBigError once the archive passes `maxBytes`, before reading a file that would.
 * `source` itself is followed when it is a link (a workspace folder given as `data/ws`, `data` a link
 * to another disk): what is meant is the folder, and a link to the coordinator's path would dangle on
 * every worker. Links inside it are kept as links.
 */
export interface Packed {
  digest: string;
  bytes: number;
  skipped: string[];
}

export class TooBigError extends Error {
  override name = 'TooBigError';
}

/** The mtime of every entry: 2000-01-01, the baseline commit's date (workspace.ts); a copy's times are not kept anyway. */
const MTIME = 946_684_800;
const BLOCK = 512;

export async function packTar(source: string, out: string, maxBytes: number): Promise<Packed> {
  const hash = createHash('sha256');
  const file = await fs.open(out, 'w');
  let bytes = 0;
  const skipped: string[] = [];
  const write = async (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > maxBytes) throw new TooBigError(`${source} packs to more than ${mib(maxBytes)}`);
    hash.update(chunk);
    await file.write(chunk);
  };
  try {
    const real = await fs.realpath(source);
    const top = await fs.lstat(real);
    if (top.isDirectory()) await packDir(real, '', write, skipped, maxBytes, () => bytes);
    else await packEntry(real, path.basename(source), top, write, skipped, maxBytes, () => bytes);
    await write(Buffer.alloc(BLOCK * 2));
  } finally {
    await file.close();
  }
  return { digest: hash.digest('hex'), bytes, skipped };
}

type Write = (chunk: Buffer) => Promise<void>;

async function packDir(dir: string, rel: string, write: Write, skipped: string[], maxBytes: number, written: () => number): Promise<void> {
  const names = (await fs.readdir(dir)).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  for (const name of names) {
    const abs = path.join(dir, name);
    const st = await fs.lstat(abs);
    await packEntry(abs, rel ? `${rel}/${name}` : name, st, write, skipped, maxBytes, written);
  }
}

async function packEntry(
  abs: string,
  name: string,
  st: import('node:fs').Stats,
  write: Write,
  skipped: string[],
  maxBytes: number,
  written: () => number,
): Promise<void> {
  const mode = st.mode & 0o777;
  if (st.isDirectory()) {
    await write(header(`${name}/`, '5', mode, 0, ''));
    await packDir(abs, name, write, skipped, maxBytes, written);
  } else if (st.isSymbolicLink()) {
    await write(header(name, '2', mode, 0, await fs.readlink(abs)));
  } else if (st.isFile()) {
    // Said before reading it: a 5 GB file would otherwise be read whole only to be refused.
    if (written() + st.size > maxBytes) throw new TooBigError(`${abs} alone is ${mib(st.size)}`);
    const body = await fs.readFile(abs);
    await write(header(name, '0', mode, body.length, ''));
    await write(body);
    const pad = (BLOCK - (body.length % BLOCK)) % BLOCK;
    if (pad) await write(Buffer.alloc(pad));
  } else {
    skipped.push(abs);
  }
}

/** One entry's header block(s): a pax record first when the name or link target does not fit ustar's 100 bytes. */
function header(name: string, type: '0' | '2' | '5', mode: number, size: number, link: string): Buffer {
  const long = Buffer.byteLength(name) > 100 || Buffer.byteLength(link) > 100;
  const main = ustar(long ? name.slice(0, 90).replace(/[^\x20-\x7e]/g, '_') : name, type, mode, size, long ? '' : link);
  if (!long) return main;
  const records = [pax('path', name), ...(link ? [pax('linkpath', link)] : [])].join('');
  const body = Buffer.from(records, 'utf8');
  const pad = Buffer.alloc((BLOCK - (body.length % BLOCK)) % BLOCK);
  return Buffer.concat([ustar('PaxHeader', 'x', 0o644, body.length, ''), body, pad, main]);
}

/** A pax record: "LEN key=value\n", LEN counting itself. */
function pax(key: string, value: string): string {
  const rest = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(rest) + 1;
  while (String(len).length + Buffer.byteLength(rest) !== len) len++;
  return `${len}${rest}`;
}

function ustar(name: string, type: string, mode: number, size: number, link: string): Buffer {
  const b = Buffer.alloc(BLOCK);
  b.write(name, 0, 100, 'utf8');
  octal(b, 100, 8, mode);
  octal(b, 108, 8, 0);
  octal(b, 116, 8, 0);
  octal(b, 124, 12, size);
  octal(b, 136, 12, MTIME);
  b.fill(0x20, 148, 156);
  b.write(type, 156, 1, 'ascii');
  b.write(link, 157, 100, 'utf8');
  b.write('ustar\0', 257, 6, 'ascii');
  b.write('00', 263, 2, 'ascii');
  let sum = 0;
  for (const byte of b) sum += byte;
  b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  return b;
}

function octal(b: Buffer, at: number, width: number, value: number): void {
  b.write(`${value.toString(8).padStart(width - 1, '0')}\0`, at, width, 'ascii');
}

export function mib(bytes: number): string {
  return `${(bytes / 1024 ** 2).toFixed(bytes < 1024 ** 2 ? 2 : 0)} MiB`;
}
