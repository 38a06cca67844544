import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../src/mock-server/server.js';
import { startCassette, type Cassette } from '../../src/replay/cassette.js';
import { Store } from '../../src/store/store.js';
import { startGymAgent, type RunningGymAgent } from '../../src/train/gym-agent/agent.js';
import { findChromium, visit } from '../support/chromium.js';
import { mockGymAgentOptions } from '../support/gym-agent-options.js';
import { startTestProxy, type TestProxy } from '../support/start-proxy.js';
import { startWebAttacker, type Attempt, type Seen } from '../support/web-attacker.js';
import { patient } from '../support/patience.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * Closed doors, in a real browser (Debian's headless Chromium, as the report tests use): a hostile
 * page tries polar's servers two ways. Cross-origin: served from another loopback port, it posts to
 * the server directly (a `no-cors` text/plain POST needs no preflight; a JSON one does). DNS
 * rebinding: served as http://attacker.test:PORT (resolved to 127.0.0.2, on the victim's port
 * number), whose later connections a relay hands to the victim on 127.0.0.1, so the page's requests
 * are same-origin and it could read every answer. A control victim with no checks shows the page
 * does read what it is let read; polar's servers must refuse everything, with no effect.
 */
const chromium = findChromium();
const REBIND = ['--host-resolver-rules=MAP attacker.test 127.0.0.2'];
let dir: string;
let mock: MockServer;
let vllm: MockServer;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-browser-doors-'));
  [mock, vllm] = await Promise.all([startMockServer({ nemoRl: { temperature: 1, topP: 1 } }), startMockServer()]);
});
afterAll(async () => {
  await mock?.close();
  await vllm?.close();
  removeTree(dir);
});

/** Runs the page: cross-origin from 127.0.0.1:<any>, or rebound onto `victimPort`. */
async function attack(mode: 'cross-origin' | 'rebinding', victimPort: number, attempts: Attempt[]): Promise<Seen[]> {
  const site = await startWebAttacker(
    mode === 'rebinding'
      ? { host: '127.0.0.2', port: victimPort, name: 'attacker.test', attempts, rebindTo: victimPort }
      : { host: '127.0.0.1', port: 0, attempts },
  );
  try {
    const dom = await visit(chromium!, site.url, mode === 'rebinding' ? REBIND : []);
    // A safety net only: the page reports before Chromium exits, unless it never ran.
    const seen = await Promise.race([site.report, new Promise<null>((resolve) => setTimeout(() => resolve(null), patient(5000)).unref())]);
    if (!seen) throw new Error(`the page never reported (Chromium left: ${dom.slice(0, 300)})`);
    return seen;
  } finally {
    await site.close();
  }
}

const post = (name: string, url: string, body: unknown, init: Attempt['init'] = {}): Attempt => ({
  name,
  url,
  init: { method: 'POST', body: JSON.stringify(body), ...init },
});

describe.skipIf(!chromium)(
  `a web page against polar (headless Chromium${chromium ? '' : ': skipped, no Chromium here (apt-get install chromium, or set POLAR_CHROMIUM)'})`,
  () => {
    it(
      'control: a rebound page reads whatever a server without checks answers (the harness is not vacuous)',
      async () => {
        const open = http.createServer((req, res) => {
          req.resume();
          res.writeHead(200, { 'content-type': 'text/plain' }).end(`recorded secret for Host ${req.headers.host}`);
        });
        await new Promise<void>((resolve) => open.listen(0, '127.0.0.1', () => resolve()));
        const port = (open.address() as { port: number }).port;
        try {
          const seen = await attack('rebinding', port, [{ name: 'read', url: '/v1/models', init: {} }]);
          expect(seen).toEqual([expect.objectContaining({ name: 'read', status: 200, body: `recorded secret for Host attacker.test:${port}` })]);
        } finally {
          await new Promise<void>((resolve) => open.close(() => resolve()));
        }
      },
      patient(120_000),
    );

    describe('polar gym-agent /run', () => {
      let agent: RunningGymAgent;
      let dbPath: string;
      const notices: string[] = [];
      const marker = (n: string) => path.join(dir, n);

      beforeAll(async () => {
        dbPath = path.join(dir, 'agent.db');
        const tasksFile = path.join(dir, 'tasks.jsonl');
        fs.writeFileSync(
          tasksFile,
          JSON.stringify({
            id: 'known',
            prompt: 'p',
            workspace: { empty: true },
            setup: [`touch ${marker('known-ran')}`],
            evaluator: { type: 'session-completed' },
          }),
        );
        agent = await startGymAgent(mockGymAgentOptions({ mock, dbPath, outDir: path.join(dir, 'out'), tasksFile, notices }));
      });
      afterAll(async () => {
        await agent?.close();
      });

      const inline = (name: string) => ({
        responses_create_params: { input: 'p' },
        task: { id: 'evil', prompt: 'p', workspace: { empty: true }, setup: [`touch ${marker(name)}`], evaluator: { type: 'session-completed' } },
      });
      const ranNothing = () => {
        expect(['known-ran', 'cross-ran', 'rebind-ran'].filter((m) => fs.existsSync(marker(m)))).toEqual([]);
        const store = Store.open(dbPath, { readonly: true });
        try {
          expect(store.rollouts.samples(agent.rolloutId)).toEqual([]);
          expect(store.sessions.list().filter((s) => s.id.startsWith('ses_'))).toEqual([]);
        } finally {
          store.close();
        }
      };

      it.skipIf(!chromium)(
        'a page on another origin cannot make it run anything (text/plain no-cors, JSON, a known task id)',
        async () => {
          const base = agent.url;
          const before = notices.length;
          const seen = await attack('cross-origin', Number(new URL(base).port), [
            post('inline, text/plain, no-cors', `${base}/run`, inline('cross-ran'), { mode: 'no-cors' }),
            post('known task, text/plain, no-cors', `${base}/run`, { responses_create_params: { input: 'p' }, task_id: 'known' }, { mode: 'no-cors' }),
            post('inline, JSON (preflighted)', `${base}/run`, inline('cross-ran'), { headers: { 'content-type': 'application/json' } }),
          ]);
          expect(seen.map((s) => [s.name, s.status ?? s.error!.split(':')[0]])).toEqual([
            ['inline, text/plain, no-cors', 0],
            ['known task, text/plain, no-cors', 0],
            ['inline, JSON (preflighted)', 'TypeError'],
          ]);
          // The requests arrived and were refused by the server, not merely hidden by the browser.
          const refused = notices.slice(before).filter((n) => /refused (POST|OPTIONS) \/run: .*(Origin|Sec-Fetch-Site)/.test(n));
          expect(refused.length).toBeGreaterThanOrEqual(3);
          ranNothing();
        },
        patient(120_000),
      );

      it.skipIf(!chromium)(
        'a DNS-rebinding page (same origin, so it reads answers) gets 403 for everything',
        async () => {
          const port = Number(new URL(agent.url).port);
          const seen = await attack('rebinding', port, [
            post('inline JSON', '/run', inline('rebind-ran'), { headers: { 'content-type': 'application/json' } }),
            post('known task JSON', '/run', { responses_create_params: { input: 'p' }, task_id: 'known' }, { headers: { 'content-type': 'application/json' } }),
            { name: 'readiness', url: '/', init: {} },
          ]);
          for (const s of seen) {
            expect(s.status, s.name).toBe(403);
            expect((JSON.parse(s.body!) as { error: { message: string } }).error.message, s.name).toMatch(
              /Host "attacker\.test:\d+" is not this server's address/,
            );
          }
          ranNothing();
        },
        patient(120_000),
      );
    });

    describe('polar replay --serve', () => {
      let t: TestProxy;
      let cassette: Cassette;
      const messages = [{ role: 'user', content: 'recorded prompt' }];

      beforeAll(async () => {
        t = await startTestProxy(vllm.url);
        await fetch(`${t.proxy.baseUrl('recorded')}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages }),
        });
        cassette = await startCassette(t.store, 'recorded');
      });
      afterAll(async () => {
        await cassette?.close();
        await t?.close();
      });

      it.skipIf(!chromium)(
        'a DNS-rebinding page cannot read the recording (token ids, logprobs); a cross-origin page cannot either',
        async () => {
          const port = Number(new URL(cassette.url).port);
          const body = { model: 'm', messages };
          const rebound = await attack('rebinding', port, [
            post('replay the recording', '/v1/chat/completions', body, { headers: { 'content-type': 'application/json' } }),
            { name: 'models', url: '/v1/models', init: {} },
          ]);
          for (const s of rebound) {
            expect(s.status, s.name).toBe(403);
            expect(s.body, s.name).not.toMatch(/token_ids|logprob|recorded prompt/);
          }
          const cross = await attack('cross-origin', port, [
            post('replay, cors', `${cassette.url}/v1/chat/completions`, body, { headers: { 'content-type': 'application/json' } }),
            { name: 'models, cors', url: `${cassette.url}/v1/models`, init: {} },
          ]);
          expect(cross.map((s) => s.error?.split(':')[0])).toEqual(['TypeError', 'TypeError']);
          // Nothing was served from the tape: the cassette matched no call.
          expect(cassette.matched()).toBe(0);
        },
        patient(120_000),
      );
    });

    describe('polar proxy /admin/*', () => {
      let t: TestProxy;

      beforeAll(async () => {
        t = await startTestProxy(vllm.url, { policyVersion: 'v0', adminToken: 'admin-token-0123456789abcdef0123456789' });
      });
      afterAll(async () => {
        await t?.close();
      });

      it.skipIf(!chromium)(
        'neither a cross-origin nor a rebinding page can set the policy version or pause it',
        async () => {
          const port = Number(new URL(t.proxy.url).port);
          const version = { version: 'evil-v1' };
          await attack('cross-origin', port, [
            post('version, no-cors', `${t.proxy.url}/admin/policy-version`, version, { mode: 'no-cors' }),
            post('pause, no-cors', `${t.proxy.url}/admin/pause`, {}, { mode: 'no-cors' }),
            post('version, JSON', `${t.proxy.url}/admin/policy-version`, version, { headers: { 'content-type': 'application/json' } }),
          ]);
          const rebound = await attack('rebinding', port, [
            post('version', '/admin/policy-version', version, { headers: { 'content-type': 'application/json' } }),
            { name: 'status', url: '/admin/status', init: {} },
          ]);
          expect(rebound.map((s) => s.status)).toEqual([403, 403]);
          expect(t.proxy.admin.policyVersion).toBe('v0');
          expect(t.proxy.admin.gate.isPaused).toBe(false);
        },
        patient(120_000),
      );
    });
  },
);
