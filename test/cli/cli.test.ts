import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store } from '../../src/store/store.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

const run = promisify(execFile);
const BIN = path.resolve(__dirname, '../../bin/polar.js');
let dir: string;
let db: string;

async function polar(args: string[], env: NodeJS.ProcessEnv = {}) {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-cli-'));
  db = path.join(dir, 'polar.db');
  const store = Store.open(db);
  store.sessions.ensure('ses-a', { harness: 'custom' });
  store.requests.begin({
    id: 'r1',
    sessionId: 'ses-a',
    agentId: 'main',
    provider: 'openai-chat',
    method: 'POST',
    path: '/v1/chat/completions',
    startedAt: 1_700_000_000_000,
    streamed: true,
    requestHeaders: {},
    requestedModel: 'x',
    servedModel: 'y',
  });
  store.requests.end('r1', {
    endedAt: 1_700_000_001_500,
    status: 'ok',
    httpStatus: 200,
    reply: '',
    finishReason: 'stop',
    tokens: { source: 'upstream', promptIds: [1, 2, 3], sampledIds: [4, 5], logprobs: [-1, -2] },
  });
  // A clean close completes the sessions this process created and left open (store/owners.ts).
  store.close();
});

afterAll(() => removeTree(dir));

describe('polar CLI', () => {
  it('--version prints the package version', async () => {
    const pkg = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../package.json'), 'utf8'));
    expect((await polar(['--version'])).stdout.trim()).toBe(pkg.version);
  });

  it('sessions --json lists sessions with call and token counts', async () => {
    const { code, stdout } = await polar(['sessions', '--db', db, '--json']);
    expect(code).toBe(0);
    expect(JSON.parse(stdout).sessions).toEqual([expect.objectContaining({ id: 'ses-a', requests: 1, promptTokens: 3, sampledTokens: 2, harness: 'custom' })]);
  });

  it('sessions reads $POLAR_DB when --db is not given, and prints a table', async () => {
    const { stdout } = await polar(['sessions'], { POLAR_DB: db });
    expect(stdout).toMatch(/SESSION\s+STATUS/);
    expect(stdout).toMatch(/ses-a\s+completed\s+custom\s+1\s+0\s+3\s+2/);
  });

  it('show lists a session calls, as text and JSON', async () => {
    const text = await polar(['show', 'ses-a', '--db', db]);
    expect(text.stdout).toMatch(/agent main\s+1 call\n/);
    expect(text.stdout).toMatch(/completed\s+custom\s+1 call\s+3 prompt \/ 2 sampled tokens/);
    expect(text.stdout).toMatch(/1\s+openai-chat\s+ok\s+200\s+yes\s+3\s+2\s+stop\s+1\.5s\s+upstream/);
    const json = JSON.parse((await polar(['show', 'ses-a', '--db', db, '--json'])).stdout);
    expect(json.calls[0]).toMatchObject({ id: 'r1', seq: 1, promptTokenCount: 3, sampledTokenCount: 2 });
  });

  it('errors say what to do next and set the exit code', async () => {
    const missing = await polar(['show', 'nope', '--db', db]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no session "nope".*polar sessions/);
    const nodb = await polar(['sessions', '--db', path.join(dir, 'absent.db'), '--json']);
    expect(nodb.code).toBe(2);
    expect(JSON.parse(nodb.stdout)).toMatchObject({ ok: false, error: { code: 'POLAR_USAGE' } });
    const badPort = await polar(['proxy', '--upstream', 'http://127.0.0.1:1', '--model', 'm', '--port', 'x', '--db', db]);
    expect(badPort.code).toBe(2);
    expect(badPort.stderr).toMatch(/--port must be an integer/);
    const badPortJson = await polar(['proxy', '--upstream', 'http://127.0.0.1:1', '--port', '99999', '--json']);
    expect(badPortJson.code).toBe(2);
    expect(JSON.parse(badPortJson.stdout)).toMatchObject({
      ok: false,
      error: { code: 'POLAR_USAGE', message: expect.stringMatching(/--port must be an integer from 0 to 65535/) },
    });
  });

  it(
    'an unknown command is an error, even with --help after it (no top-level help, exit 2)',
    async () => {
      for (const args of [['no-such-command', '--help'], ['no-such-command'], ['sesions']]) {
        const r = await polar(args);
        expect(r.code, args.join(' ')).toBe(2);
        expect(r.stdout).not.toMatch(/Usage: polar/);
        expect(r.stderr).toMatch(new RegExp(`unknown command '${args[0]}'`));
      }
      expect((await polar(['sesions'])).stderr).toMatch(/did you mean sessions/);
      const helpTypo = await polar(['help', 'sesions']);
      expect(helpTypo.code).toBe(2);
      expect(helpTypo.stderr).toMatch(/unknown command 'sesions' \(did you mean sessions\?\)/);
      expect((await polar(['sessions', '--help'])).code).toBe(0);
      // One level down too: a subcommand typo is not the parent's help.
      const cases = [
        ['train', 'nope', '--help'],
        ['rollout', 'stauts', '--help'],
        ['db', 'copi'],
      ];
      const [help, ...results] = await Promise.all([polar(['rollout', 'status', '--help']), ...cases.map((args) => polar(args))]);
      cases.forEach((args, i) => {
        expect(results[i]!.code, args.join(' ')).toBe(2);
        expect(results[i]!.stderr).toMatch(new RegExp(`unknown command '${args[0]} ${args[1]}'`));
      });
      expect(help!.code).toBe(0);
      // Each case is a fresh CLI process: slow on 2 busy cores.
    },
    patient(90_000),
  );

  it('reconstruct writes trajectory JSONL and a summary; --stats-json has the numbers', async () => {
    const out = path.join(dir, 'traces.jsonl');
    const statsFile = path.join(dir, 'stats.json');
    const r = await polar(['reconstruct', '--db', db, '--strategy', 'per-request', '--out', out, '--stats-json', statsFile]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/per-request: 1 session, 1 call \(1 used, 0 excluded\) → 1 trace,/);
    const traces = fs
      .readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(traces).toEqual([
      expect.objectContaining({
        session_id: 'ses-a',
        agent_id: 'main',
        strategy: 'per-request',
        trace_index: 0,
        request_ids: ['r1'],
        prompt_ids: [1, 2, 3],
        response_ids: [4, 5],
        loss_mask: [1, 1],
        response_logprobs: [-1, -2],
        reward: null,
        status: 'completed',
      }),
    ]);
    expect(JSON.parse(fs.readFileSync(statsFile, 'utf8'))).toMatchObject({ traces: 1, tokensPerRequest: 5, tokensMerged: 5 });
    const bad = await polar(['reconstruct', '--db', db, '--strategy', 'nope']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/choose one of: per-request, prefix-merging/);
  });

  it(
    'a reader that closes the pipe early (`| head`) ends polar quietly with 0',
    async () => {
      // Many sessions, so that `sessions` writes more than a pipe holds: a write is refused mid-table.
      const many = path.join(dir, 'many.db');
      const store = Store.open(many);
      for (let i = 0; i < 2000; i += 1) store.sessions.ensure(`ses-${String(i).padStart(5, '0')}-with-a-long-name-to-fill-the-pipe`, { harness: 'custom' });
      store.close();
      for (const args of [
        ['run', '--help'],
        ['sessions', '--db', many],
        ['sessions', '--db', many, '--json'],
      ]) {
        const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
        // Closed before the child has started: its first write meets a pipe with no reader.
        child.stdout.destroy();
        let stderr = '';
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
        expect(stderr, args.join(' ')).toBe('');
        expect(code, args.join(' ')).toBe(0);
      }
    },
    patient(60_000),
  );

  it('proxy refuses a non-loopback host without --auth-token', async () => {
    const r = await polar(['proxy', '--upstream', 'http://127.0.0.1:1', '--model', 'm', '--host', '0.0.0.0', '--db', path.join(dir, 'x.db')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--auth-token/);
  });
});
