import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { runShell, type ShellResult } from '../../src/core/process/shell.js';
import { DEFAULT_LIMITS, findBwrap, openJail, privateSocketPath, type JailSpec, type SandboxLimits, type SandboxSettings } from '../../src/sandbox/index.js';
import { cgroupSupport } from '../../src/sandbox/limits.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';
import { processesWith } from '../support/processes.js';

/**
 * The sandbox against real bubblewrap: what a command inside can and cannot reach. Each test runs
 * real commands and asserts on what they printed and how they ended.
 */
const bwrap = findBwrap();
const cgroups = cgroupSupport() !== null;

describe.skipIf(!bwrap)('bwrap sandbox (skipped: bubblewrap is not installed; apt-get install bubblewrap)', () => {
  let root: string;
  let workspace: string;
  let sibling: string;
  let tasksDir: string;
  let userHome: string;
  let dbFile: string;
  let mock: MockServer;
  let tp: TestProxy;
  let socket: Awaited<ReturnType<typeof privateSocketPath>>;
  let other: http.Server;
  let otherPort: number;

  const settings = (limits: Partial<SandboxLimits> = {}): SandboxSettings => ({
    kind: 'bwrap',
    bwrap: bwrap!,
    network: 'proxy-only',
    limits: { ...DEFAULT_LIMITS, ...limits },
    extraReadOnly: [],
  });

  async function inside(
    command: string,
    opts: { spec?: Partial<JailSpec>; limits?: Partial<SandboxLimits>; network?: JailSpec['network']; timeoutMs?: number } = {},
  ): Promise<ShellResult & { limit: string | null }> {
    const jail = await openJail(settings(opts.limits), {
      cwd: workspace,
      network: opts.network ?? 'proxy-only',
      proxy: { port: tp.proxy.port, socket: socket.path },
      ...opts.spec,
    });
    const r = await runShell(command, {
      cwd: workspace,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      timeoutMs: opts.timeoutMs ?? patient(20_000),
      wrap: (c) => jail.wrap(c),
    });
    const limit = await jail.close({ exitCode: r.exitCode, signal: r.signal });
    return { ...r, limit };
  }

  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-sbx-test-'));
    workspace = path.join(root, 'workspaces', 'task-0');
    sibling = path.join(root, 'workspaces', 'task-1');
    tasksDir = path.join(root, 'tasks');
    userHome = path.join(root, 'home');
    for (const d of [workspace, sibling, tasksDir, path.join(userHome, '.ssh')]) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(sibling, 'answer.txt'), 'sibling secret');
    fs.writeFileSync(path.join(tasksDir, 'checker.py'), 'hidden checker');
    fs.writeFileSync(path.join(userHome, '.ssh', 'id_rsa'), 'PRIVATE KEY');
    dbFile = path.join(root, 'polar.db');
    fs.writeFileSync(dbFile, 'db');
    mock = await startMockServer({});
    socket = await privateSocketPath();
    tp = await startTestProxy(mock.url, { unixSocket: socket.path });
    other = http.createServer((_req, res) => res.end('other service'));
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    otherPort = (other.address() as { port: number }).port;
  });

  afterAll(async () => {
    await tp?.close();
    await socket?.remove();
    await mock?.close();
    other?.close();
    removeTree(root);
  });

  it('shows the workspace and the toolchain, not the host: no tasks dir, database, sibling, home or /root', async () => {
    const r = await inside(
      `echo hi > made.txt && cat made.txt; ls / | tr '\\n' ' '; echo; for p in ${tasksDir}/checker.py ${dbFile} ${sibling}/answer.txt ${userHome}/.ssh/id_rsa ${os.homedir()}/.ssh ${os.homedir()}/.bash_history /etc/shadow /etc/ssh /etc/ssl/private /etc/environment /home ${process.cwd()}/package.json ${process.cwd()}/src; do test -e "$p" && echo "VISIBLE $p"; done; echo home-holds: $(ls -A ${os.homedir()} 2>/dev/null); test -r /etc/ssl/certs/ca-certificates.crt && echo certs-ok; getent hosts localhost >/dev/null && echo resolver-ok; git --version; node -e "console.log('node ok')"; echo home=$HOME`,
    );
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain('hi\n');
    expect(r.stdout).not.toContain('VISIBLE');
    expect(r.stdout).toMatch(/git version/);
    expect(r.stdout).toContain('node ok');
    expect(r.stdout).toContain('certs-ok');
    expect(r.stdout).toContain('resolver-ok');
    expect(fs.readFileSync(path.join(workspace, 'made.txt'), 'utf8')).toBe('hi\n');
    expect(r.stdout).not.toMatch(/home=\/root\b/);
    // The invoking user's home shows only the toolchains PATH needs from it (~/.pyenv here), never itself.
    const homeHolds = /home-holds:(.*)/.exec(r.stdout)![1]!.trim().split(/\s+/).filter(Boolean);
    for (const name of homeHolds) expect(process.env.PATH?.split(':').some((d) => d.startsWith(path.join(os.homedir(), name)))).toBe(true);
    expect(r.limit).toBeNull();
  });

  it('refuses a working directory that is the machine, a system folder, or holds the home folder', async () => {
    for (const cwd of ['/', '/etc', os.homedir(), path.dirname(os.homedir())]) {
      await expect(openJail(settings(), { cwd, network: 'none' })).rejects.toThrow(/the sandbox makes the working directory writable/);
    }
  });

  it('refuses writes outside the workspace and its home', async () => {
    // A write under /tmp lands in the sandbox's own /tmp (the host's is not there): the host never sees it.
    const r = await inside(
      `echo x > /usr/polar-probe 2>/dev/null && echo WROTE-usr; echo x >> /etc/hosts 2>/dev/null && echo WROTE-etc; echo x > ${root}/outside 2>/dev/null; echo x > ${path.join(process.cwd(), 'node_modules', 'polar-probe')} 2>/dev/null && echo WROTE-modules; mkdir /new-dir 2>/dev/null && echo WROTE-root; echo x > ${path.dirname(process.cwd())}/probe 2>/dev/null && echo WROTE-parent; true`,
    );
    // A checkout under /tmp (where new users put them) has its parent in the sandbox's private /tmp:
    // the write lands there, never on the host (checked below), so only that line may say WROTE.
    const parentInPrivateTmp = underTmp(path.dirname(process.cwd()));
    expect(r.stdout.replace(parentInPrivateTmp ? /WROTE-parent\n?/ : /$^/, '')).not.toContain('WROTE');
    expect(fs.existsSync(`${path.dirname(process.cwd())}/probe`)).toBe(false);
    expect(fs.existsSync(path.join(process.cwd(), 'node_modules', 'polar-probe'))).toBe(false);
    expect(fs.existsSync('/usr/polar-probe')).toBe(false);
    expect(fs.existsSync(path.join(root, 'outside'))).toBe(false);
  });

  it('reaches the proxy through the bridge at 127.0.0.1:PORT, and no other loopback port', async () => {
    const r = await inside(
      `curl -s -m 5 http://127.0.0.1:${tp.proxy.port}/v1/models; echo; curl -s -m 5 http://127.0.0.1:${otherPort}/ && echo OTHER-REACHED; node -e "require('net').connect(${otherPort},'127.0.0.1').on('connect',()=>{console.log('NODE-REACHED');process.exit(0)}).on('error',e=>{console.log('refused '+e.code);process.exit(0)})"; curl -s -m 5 https://example.com >/dev/null && echo INTERNET`,
    );
    expect(r.stdout).toContain('Qwen/Qwen3-8B');
    expect(r.stdout).not.toContain('OTHER-REACHED');
    expect(r.stdout).not.toContain('NODE-REACHED');
    expect(r.stdout).toContain('refused');
    expect(r.stdout).not.toContain('INTERNET');
  });

  it('evaluator network none: nothing at all, and its private files read-only', async () => {
    const r = await inside(
      `curl -s -m 3 http://127.0.0.1:${tp.proxy.port}/v1/models && echo PROXY; cat ${tasksDir}/checker.py; echo x > ${tasksDir}/new 2>/dev/null && echo WROTE`,
      { network: 'none', spec: { network: 'none', readOnly: [tasksDir] } },
    );
    expect(r.stdout).not.toContain('PROXY');
    expect(r.stdout).toContain('hidden checker');
    expect(r.stdout).not.toContain('WROTE');
  });

  it('host network when asked: other loopback ports are reachable', async () => {
    const r = await inside(`curl -s -m 5 http://127.0.0.1:${otherPort}/`, { network: 'host', spec: { network: 'host' } });
    expect(r.stdout).toContain('other service');
  });

  it('cannot see or signal processes outside: its own pid namespace, no capabilities', async () => {
    const r = await inside(
      `ps -e -o pid= | wc -l; kill -0 ${process.pid} 2>/dev/null && echo CAN-SIGNAL; grep CapEff /proc/self/status; mknod /tmp/disk b 8 0 2>/dev/null && echo MKNOD; unshare -U true 2>/dev/null && echo USERNS; kill -9 -1 2>/dev/null; true`,
    );
    expect(r.stdout).not.toContain('CAN-SIGNAL');
    expect(r.stdout).not.toContain('MKNOD');
    expect(r.stdout).not.toContain('USERNS');
    expect(r.stdout).toMatch(/CapEff:\s+0000000000000000/);
    expect(process.kill(process.pid, 0)).toBe(true);
  });

  it('leaves no daemon behind', async () => {
    const marker = `polar-daemon-${process.pid}-${Date.now()}`;
    await inside(`setsid nohup sh -c 'sleep 1000; : ${marker}' >/dev/null 2>&1 & echo started`);
    const left = processesWith(marker);
    expect(left).toEqual([]);
  });

  it('ends a 10 GB file at the file size cap, with the reason', async () => {
    const r = await inside(`head -c 10G /dev/zero > big.bin`, { limits: { maxFileSizeBytes: 1024 * 1024 } });
    expect(r.limit).toMatch(/^file size limit 1 MiB exceeded/);
    expect(fs.statSync(path.join(workspace, 'big.bin')).size).toBe(1024 * 1024);
    fs.rmSync(path.join(workspace, 'big.bin'));
  });

  it('finds a capped file a tool left while the command itself went on', async () => {
    const r = await inside(`head -c 10G /dev/zero > /tmp/big.bin; echo carried on`, { limits: { maxFileSizeBytes: 1024 * 1024 } });
    expect(r.exitCode).toBe(0);
    expect(r.limit).toBe('file size limit 1 MiB exceeded (/tmp/big.bin)');
    // In the workspace, as a harness's tool would: looked for when the run asks (the harness run does).
    const inWorkspace = await inside(`head -c 10G /dev/zero > big2.bin; echo carried on`, {
      limits: { maxFileSizeBytes: 1024 * 1024 },
      spec: { findCappedFiles: true },
    });
    expect(inWorkspace.exitCode).toBe(0);
    expect(inWorkspace.limit).toBe(`file size limit 1 MiB exceeded (${path.join(workspace, 'big2.bin')})`);
    fs.rmSync(path.join(workspace, 'big2.bin'));
  });

  it.skipIf(!cgroups)('ends a fork bomb at the process cap, with the reason', async () => {
    const r = await inside(`bomb() { bomb | bomb & }; bomb; sleep 30`, { limits: { maxProcs: 64 } });
    expect(r.limit).toBe('process limit 64 reached');
    expect(r.timedOut).toBe(false);
  });

  it.skipIf(!cgroups)('ends a memory hog at the memory cap, with the reason', async () => {
    const r = await inside(`node -e "const a=[]; for(;;) a.push(Buffer.alloc(16*1024*1024, 1))"; sleep 30`, { limits: { maxMemoryBytes: 256 * 1024 * 1024 } });
    expect(r.limit).toBe('memory limit 256 MiB reached (a process was OOM-killed)');
    expect(r.timedOut).toBe(false);
  });

  it.skipIf(!cgroups)('ends a CPU spinner at the CPU time cap, with the reason', async () => {
    const r = await inside(`while :; do :; done`, { limits: { maxCpuSeconds: 1 } });
    expect(r.limit).toBe('CPU time limit 1 s reached');
  });
});

/** A path the sandbox shows inside its own private /tmp (or /var/tmp) rather than the host's. */
function underTmp(p: string): boolean {
  return ['/tmp', '/var/tmp'].some((t) => p === t || p.startsWith(`${t}/`));
}
