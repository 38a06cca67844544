import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runShell } from '../core/process/shell.js';
import { findForwarder } from './bridge.js';
import { findBwrap } from './find.js';
import { openJail } from './jail.js';
import { privateSocketPath } from './socket.js';
import { DEFAULT_LIMITS, type ForwarderKind } from './types.js';
import { processesWith } from '../../test/support/processes.js';
import { waitUntil } from '../../test/support/wait.js';

/**
 * The proxy-only bridge against real bubblewrap, with each forwarder (bridge.ts): it relays both
 * ways as bytes come, refuses what it cannot serve, passes the command's exit on, stays up through
 * the signals a terminal sends, and is gone with the sample. A stand-in proxy on a Unix socket
 * answers; the command inside talks to it at 127.0.0.1:PORT.
 */
const bwrap = findBwrap();
const kinds: ForwarderKind[] = (await findForwarder()).kind === 'perl' ? ['perl', 'node'] : ['node'];
const PORT = 4318;
/** Bytes each way in the full-duplex test: more than the loopback's socket buffers hold. */
const BOTH = 24 * 1024 * 1024;

describe.skipIf(!bwrap).each(kinds)('the %s bridge (skipped without bubblewrap)', (kind) => {
  let root: string;
  let socket: Awaited<ReturnType<typeof privateSocketPath>>;
  let proxy: http.Server;
  // The streaming test's first reply, held open until the command says it has read its first part.
  let held: http.ServerResponse | null = null;

  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-bridge-test-'));
    socket = await privateSocketPath();
    proxy = http.createServer((req, res) => {
      if (req.url === '/both') {
        // The whole reply at once, before reading the request's body: a client that writes all of
        // its body before it reads (as this test's does) needs each direction to flow on its own.
        res.writeHead(200, { 'content-length': String(BOTH) });
        res.end(Buffer.alloc(BOTH, 7));
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        if (req.url === '/echo') {
          // Both directions with a body larger than any one read: its hash back, and its bytes.
          res.setHeader('x-sha', createHash('sha256').update(body).digest('hex'));
          res.end(body);
        } else if (req.url === '/both') {
          // Answered while the request is still coming: the reply is not waited for below.
        } else if (req.url === '/stream') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write('data: first\n\n');
          held = res;
        } else if (req.url === '/ack') {
          // Only a forwarder that passed the first part on while the reply was still open gets here.
          held?.end('data: last\n\n');
          res.end('acked');
        } else res.end(`${req.method} ${req.url}`);
      });
    });
    await new Promise<void>((resolve) => proxy.listen(socket.path, resolve));
  });

  afterAll(async () => {
    held?.destroy();
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
    await socket.remove();
    fs.rmSync(root, { recursive: true, force: true });
  });

  async function inside(command: string, port = PORT, env: Record<string, string> = {}) {
    const jail = await openJail(
      { kind: 'bwrap', bwrap: bwrap!, network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [], forwarder: kind },
      { cwd: root, network: 'proxy-only', proxy: { port, socket: socket.path } },
    );
    const r = await runShell(command, { cwd: root, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, timeoutMs: 60_000, wrap: (c) => jail.wrap(c) });
    await jail.close({ exitCode: r.exitCode, signal: r.signal });
    return r;
  }

  it('relays a 3 MB body each way, byte for byte', async () => {
    const file = path.join(root, 'body.bin');
    const body = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7919) % 251;
    fs.writeFileSync(file, body);
    const sha = createHash('sha256').update(body).digest('hex');
    const r = await inside(`curl -sS -D - --data-binary @body.bin -o back.bin http://127.0.0.1:${PORT}/echo && sha256sum back.bin`);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.toLowerCase()).toContain(`x-sha: ${sha}`);
    expect(r.stdout).toContain(`${sha}  back.bin`);
  });

  it('keeps each direction flowing on its own: a client that sends 24 MB before reading a 24 MB reply', async () => {
    // bash's /dev/tcp: the whole request is written (blocking) before a byte of the reply is read,
    // while the proxy answers at once; past the socket buffers, a forwarder that stops reading
    // the client while the client's side is full would wait forever.
    const r = await inside(
      `exec 3<>/dev/tcp/127.0.0.1/${PORT} && { printf 'POST /both HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: ${BOTH}\\r\\nConnection: close\\r\\n\\r\\n'; head -c ${BOTH} /dev/zero; } >&3 && cat <&3 > reply.bin`,
    );
    expect(r.exitCode).toBe(0);
    const reply = fs.readFileSync(path.join(root, 'reply.bin'));
    const bodyAt = reply.indexOf('\r\n\r\n') + 4;
    expect(reply.subarray(0, 15).toString()).toBe('HTTP/1.1 200 OK');
    expect(reply.length - bodyAt).toBe(BOTH);
    expect(reply.subarray(bodyAt).every((b) => b === 7)).toBe(true);
  });

  it('passes a streamed reply on as it comes, before the reply ends', async () => {
    // The proxy finishes /stream only after /ack: a forwarder that waited for the whole reply would
    // never pass "first" on, and the command would wait until the test's safety timeout.
    const r = await inside(
      `curl -sN http://127.0.0.1:${PORT}/stream | while read -r line; do echo "got $line"; case $line in *first*) curl -s http://127.0.0.1:${PORT}/ack; echo ;; *last*) break ;; esac; done`,
    );
    expect(r.stdout).toContain('got data: first');
    expect(r.stdout).toContain('acked');
    expect(r.stdout).toContain('got data: last');
  });

  it('reaches only the proxy: another loopback port is refused', async () => {
    const r = await inside(`curl -s -m 5 http://127.0.0.1:${PORT}/ping; echo; curl -sS -m 5 http://127.0.0.1:${PORT + 1}/ 2>&1 || echo REFUSED`);
    expect(r.stdout).toContain('GET /ping');
    expect(r.stdout).toMatch(/Connection refused|Couldn't connect/);
    expect(r.stdout).toContain('REFUSED');
  });

  it("ends with the command's own exit: a code, a signal as 128 + its number, 127 for a command not found", async () => {
    expect((await inside('exit 3')).exitCode).toBe(3);
    expect((await inside('kill -TERM $$')).exitCode).toBe(128 + 15);
    const missing = await runMissing();
    expect(missing.exitCode).toBe(127);
    expect(missing.stderr).toContain('no-such-command-here');
  });

  async function runMissing() {
    const jail = await openJail(
      { kind: 'bwrap', bwrap: bwrap!, network: 'proxy-only', limits: DEFAULT_LIMITS, extraReadOnly: [], forwarder: kind },
      { cwd: root, network: 'proxy-only', proxy: { port: PORT, socket: socket.path } },
    );
    const r = await runShell('', {
      cwd: root,
      env: { PATH: '/usr/bin:/bin' },
      timeoutMs: 60_000,
      wrap: (c) => jail.wrap({ ...c, file: 'no-such-command-here', args: [] }),
    });
    await jail.close();
    return r;
  }

  it('says so and exits 125 when it cannot listen (a port below 1024, with every capability dropped)', async () => {
    const r = await inside('echo RAN', 80);
    expect(r.exitCode).toBe(125);
    expect(r.stderr).toContain('polar sandbox bridge: cannot listen on 127.0.0.1:80');
    expect(r.stdout).not.toContain('RAN');
  });

  it("starts the command whatever its PATH and PERL5OPT hold ('.', a world-writable folder, a module the sandbox lacks)", async () => {
    const open = path.join(root, 'open-bin');
    fs.mkdirSync(open, { recursive: true });
    fs.chmodSync(open, 0o777);
    const r = await inside(`echo ran; curl -s -m 5 http://127.0.0.1:${PORT}/path`, PORT, {
      PATH: `.:${open}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      PERL5OPT: '-Mno::such::module',
    });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('ran\nGET /path');
  });

  it('adds nothing to stderr or the environment where the locale is missing', async () => {
    const r = await inside('echo "badlang=${PERL_BADLANG-unset}"', PORT, { LC_ALL: 'xx_YY.UTF-8', LANG: 'xx_YY.UTF-8' });
    expect(r.stdout).toBe('badlang=unset\n');
    // bash itself names the locale it cannot set; nothing else may speak.
    expect(r.stderr.split('\n').filter((l) => l && !l.includes('setlocale'))).toEqual([]);
  });

  it("stays up through the command's own process-group signals (a Ctrl-C, kill 0), sent the moment the command starts", async () => {
    // Ten times: a forwarder that leaves the group or ignores the signals only after the command
    // may run loses this race now and then (about once in a suite run), never every time.
    for (let i = 0; i < 10; i++) {
      const r = await inside(`trap '' INT HUP QUIT; kill -INT 0; kill -HUP 0; kill -QUIT 0; curl -s -m 5 http://127.0.0.1:${PORT}/after`);
      expect(r.stdout, `round ${i}`).toContain('GET /after');
    }
  });

  it('an interactive sandbox outlives a Ctrl-C at its terminal: the command decides what it means', async () => {
    const proxy = { port: PORT, socket: socket.path };
    expect(await ctrlC(kind, 'proxy-only', proxy, `trap 'echo got-INT' INT; ${READY_THEN_WAIT}`)).toMatchObject({ code: 0, out: 'ready\ngot-INT\nalive\n' });
    // A command that sets nothing dies of it, as it would outside: the signal is not ignored for it.
    expect(await ctrlC(kind, 'proxy-only', proxy, READY_THEN_WAIT)).toMatchObject({ code: 128 + 2, out: 'ready\n' });
  });

  it('hands the command no descriptor of its own and is no child of it, and is gone with the sample', async () => {
    const marker = `polar-bridge-marker-${process.pid}-${kind}`;
    const r = await inside(
      `: ${marker}; ls -l /proc/$$/fd | grep -v ' [012] -> ' | grep -c socket: ; ps -o args= --ppid $$ > kids; echo children: $(cat kids); ps -eo args= | grep -c '^[^ ]*${kind} .*${marker}'`,
    );
    const [sockets, children, forwarders] = r.stdout.trim().split('\n');
    // Above stdio (which execa makes socket pairs): the listening socket stays with the forwarder.
    expect(sockets).toBe('0');
    expect(children).toMatch(/^children: ps -o args= --ppid \d+$/);
    // While the command ran, its forwarder (whose argv carries the command's) was there.
    expect(forwarders).toBe('1');
    const left = processesWith(marker);
    expect(left).toEqual([]);
  });
});

/** Says it is ready, then waits for a file the test makes after its Ctrl-C, then says it is alive. */
const READY_THEN_WAIT = 'echo ready; until [ -e go ]; do sleep 0.05; done; echo alive';

/**
 * `script` in an interactive sandbox in a process group of its own, sent SIGINT there once it says
 * it is ready, as a terminal sends Ctrl-C to its foreground group; then told to go on.
 */
async function ctrlC(kind: ForwarderKind, network: 'proxy-only' | 'host', proxy: { port: number; socket: string } | undefined, script: string) {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-ctrl-c-'));
  const jail = await openJail(
    { kind: 'bwrap', bwrap: bwrap!, network, limits: DEFAULT_LIMITS, extraReadOnly: [], forwarder: kind },
    { cwd, network, interactive: true, ...(proxy ? { proxy } : {}) },
  );
  try {
    const c = jail.wrap({ file: 'bash', args: ['-c', script], env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    const child = spawn(c.file, c.args, { cwd, env: c.env, detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    const exited = new Promise<number | null>((resolve) =>
      child.once('close', (code, signal) => resolve(code ?? (signal ? 128 + os.constants.signals[signal] : null))),
    );
    // Ready, or gone before it was (a sandbox that could not start: the assertions below say so).
    await new Promise<void>((resolve) => {
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.startsWith('ready\n')) resolve();
      });
      void exited.then(() => resolve());
    });
    if (!out.startsWith('ready\n')) return { code: await exited, out };
    process.kill(-child.pid!, 'SIGINT');
    // Whatever survived goes on once the signal has been handled; a sandbox that died of it is gone already.
    await waitUntil('the command to take the Ctrl-C', () => out.includes('got-INT') || child.exitCode !== null || child.signalCode !== null);
    fs.writeFileSync(path.join(cwd, 'go'), '');
    const code = await exited;
    return { code, out };
  } finally {
    await jail.close();
    fs.rmSync(cwd, { recursive: true, force: true });
  }
}

describe.skipIf(!bwrap || kinds[0] !== 'perl')('an interactive sandbox without the bridge (--network host; skipped without bubblewrap and Perl)', () => {
  it('outlives a Ctrl-C at its terminal, and a command that sets nothing dies of it', async () => {
    expect(await ctrlC('perl', 'host', undefined, `trap 'echo got-INT' INT; ${READY_THEN_WAIT}`)).toMatchObject({ code: 0, out: 'ready\ngot-INT\nalive\n' });
    expect(await ctrlC('perl', 'host', undefined, READY_THEN_WAIT)).toMatchObject({ code: 128 + 2, out: 'ready\n' });
  });
});

describe('findForwarder', () => {
  it('gives Node when asked, and Perl only at a system path', async () => {
    expect(await findForwarder('node')).toEqual({ kind: 'node', program: process.execPath });
    const found = await findForwarder();
    if (found.kind === 'perl') expect(['/usr/bin/perl', '/bin/perl']).toContain(found.program);
  });
});
