import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { pathToFileURL } from 'node:url';
import zlib from 'node:zlib';
import { patient } from './patience.js';
import { removeTree } from './remove-tree.js';

const run = promisify(execFile);

/** Debian's headless Chromium (`apt-get install chromium`; .ci/run installs it), if present. */
export function findChromium(): string | null {
  for (const bin of [process.env.POLAR_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'])
    if (bin && fs.existsSync(bin)) return bin;
  return null;
}

function flags(profile: string): string[] {
  return [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    '--force-color-profile=srgb',
    '--hide-scrollbars',
    `--user-data-dir=${profile}`,
  ];
}

/** The page's DOM after Chromium has loaded it. */
export async function dumpDom(chromium: string, file: string): Promise<string> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-chromium-'));
  try {
    const { stdout } = await run(chromium, [...flags(profile), '--dump-dom', `file://${file}`], { timeout: patient(60_000), maxBuffer: 256 * 1024 * 1024 });
    return stdout;
  } finally {
    removeTree(profile);
  }
}

/**
 * The value of `expression` in the loaded page, as rendered (`innerText` with the page's CSS applied,
 * computed styles). Dumped DOM holds the source text; this is what a reader sees. Chromium is driven
 * over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages ended by a NUL byte,
 * sent on fd 3, answered on fd 4); DevTools evaluation runs even where the page's CSP allows no script.
 */
export async function evaluate<T>(chromium: string, file: string, expression: string): Promise<T> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-chromium-'));
  const url = pathToFileURL(file).href;
  const child = spawn(chromium, [...flags(profile), '--remote-debugging-pipe', url], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const toChromium = child.stdio[3] as NodeJS.WritableStream;
  const fromChromium = child.stdio[4] as NodeJS.ReadableStream;
  // A write after Chromium has gone fails with EPIPE; the question it carried is answered below.
  toChromium.on('error', () => undefined);
  const answers = new Map<number, (message: CdpAnswer) => void>();
  let gone = false;
  const exited = new Promise<void>((resolve) =>
    child.once('close', () => {
      gone = true;
      for (const answer of answers.values()) answer({ error: { message: 'Chromium exited' } });
      resolve();
    }),
  );
  let buffered = Buffer.alloc(0);
  fromChromium.on('data', (d: Buffer) => {
    buffered = Buffer.concat([buffered, d]);
    for (let end = buffered.indexOf(0); end !== -1; end = buffered.indexOf(0)) {
      const message = JSON.parse(buffered.subarray(0, end).toString('utf8')) as CdpAnswer;
      buffered = buffered.subarray(end + 1);
      if (message.id !== undefined) answers.get(message.id)?.(message);
    }
  });
  let lastId = 0;
  const send = <R>(method: string, params: object = {}, sessionId?: string) =>
    new Promise<R>((resolve, reject) => {
      if (gone) return reject(new Error(`${method}: Chromium exited\n${stderr}`));
      const id = ++lastId;
      answers.set(id, (m) => {
        answers.delete(id);
        if (m.error) reject(new Error(`${method}: ${m.error.message}\n${stderr}`));
        else resolve(m.result as R);
      });
      toChromium.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    });
  const timer = setTimeout(() => child.kill('SIGKILL'), patient(60_000));
  try {
    let page: { targetId: string; type: string } | undefined;
    while (!page) {
      const { targetInfos } = await send<{ targetInfos: { targetId: string; type: string }[] }>('Target.getTargets');
      page = targetInfos.find((t) => t.type === 'page');
      if (!page) await new Promise((r) => setTimeout(r, 50));
    }
    const { sessionId } = await send<{ sessionId: string }>('Target.attachToTarget', { targetId: page.targetId, flatten: true });
    type Evaluated<V> = { result: { value: V }; exceptionDetails?: { text: string } };
    const inPage = <V>(expr: string) => send<Evaluated<V>>('Runtime.evaluate', { expression: expr, returnByValue: true }, sessionId);
    // The page may still show the blank document it starts with: wait until the file has loaded.
    for (;;) {
      if (gone) throw new Error(`Chromium exited before ${url} loaded\n${stderr}`);
      const now = await inPage<string | false>(`document.readyState === 'complete' && location.href`).catch(() => null);
      if (now?.result.value === url) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const answer = await inPage<T>(expression);
    if (answer.exceptionDetails) throw new Error(`${expression}: ${answer.exceptionDetails.text}`);
    return answer.result.value;
  } finally {
    send('Browser.close').catch(() => undefined);
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    child.kill('SIGKILL');
    clearTimeout(timer);
    await exited;
    removeTree(profile);
  }
}

interface CdpAnswer {
  id?: number;
  result?: unknown;
  error?: { message: string };
}

/** A screenshot of the page's first `height` pixels, decoded. */
export async function screenshot(chromium: string, file: string, out: string, width = 1280, height = 2400): Promise<Png> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-chromium-'));
  try {
    await run(chromium, [...flags(profile), `--window-size=${width},${height}`, `--screenshot=${out}`, `file://${file}`], { timeout: patient(60_000) });
    return decodePng(fs.readFileSync(out));
  } finally {
    removeTree(profile);
  }
}

export interface Png {
  width: number;
  height: number;
  /** RGBA, row-major. */
  pixels: Uint8Array;
}

/** An 8-bit RGB or RGBA PNG (what Chromium writes), decoded: chunks, inflate, per-row unfiltering. */
export function decodePng(buf: Buffer): Png {
  if (buf.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG');
  let offset = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  while (offset < buf.length) {
    const length = buf.readUInt32BE(offset);
    const type = buf.toString('latin1', offset + 4, offset + 8);
    const data = buf.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      if (data[8] !== 8 || data[12] !== 0) throw new Error('only 8-bit, non-interlaced PNGs');
      channels = data[9] === 6 ? 4 : data[9] === 2 ? 3 : 0;
      if (!channels) throw new Error(`PNG colour type ${data[9]} not handled`);
    } else if (type === 'IDAT') idat.push(data);
    offset += 12 + length;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const rows = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const row = rows.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? rows.subarray((y - 1) * stride, y * stride) : new Uint8Array(stride);
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? row[x - channels]! : 0;
      const b = prev[x]!;
      const c = x >= channels ? prev[x - channels]! : 0;
      const predictor = filter === 0 ? 0 : filter === 1 ? a : filter === 2 ? b : filter === 3 ? (a + b) >> 1 : paeth(a, b, c);
      row[x] = (src[x]! + predictor) & 0xff;
    }
  }
  const pixels = new Uint8Array(width * height * 4);
  for (let i = 0; i < width * height; i++) {
    pixels[i * 4] = rows[i * channels]!;
    pixels[i * 4 + 1] = rows[i * channels + 1]!;
    pixels[i * 4 + 2] = rows[i * channels + 2]!;
    pixels[i * 4 + 3] = channels === 4 ? rows[i * channels + 3]! : 255;
  }
  return { width, height, pixels };
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/** How many pixels are within `tolerance` of a #rrggbb colour. */
export function countColour(png: Png, hex: string, tolerance = 3): number {
  const r = parseInt(hex.slice(1, 3), 16);
  const g = parseInt(hex.slice(3, 5), 16);
  const b = parseInt(hex.slice(5, 7), 16);
  let n = 0;
  for (let i = 0; i < png.pixels.length; i += 4) {
    if (Math.abs(png.pixels[i]! - r) <= tolerance && Math.abs(png.pixels[i + 1]! - g) <= tolerance && Math.abs(png.pixels[i + 2]! - b) <= tolerance) n++;
  }
  return n;
}

/**
 * Opens an http(s) page and lets it run: Chromium waits until the page's network and timers are idle
 * (or `budgetMs` of virtual time has passed), then dumps the DOM. `extra` adds flags, e.g.
 * `--host-resolver-rules=MAP attacker.test 127.0.0.2` for a host name that resolves where a test says.
 */
export async function visit(chromium: string, url: string, extra: readonly string[] = [], budgetMs = patient(20_000)): Promise<string> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-chromium-'));
  try {
    const { stdout } = await run(chromium, [...flags(profile), ...extra, `--virtual-time-budget=${budgetMs}`, '--dump-dom', url], {
      timeout: patient(90_000),
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout;
  } finally {
    removeTree(profile);
  }
}
