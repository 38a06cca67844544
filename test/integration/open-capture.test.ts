import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Capture, openCapture } from '../../src/capture/open.js';
import { Store } from '../../src/store/store.js';
import { MAX_MODEL_LEN, type ReferenceUpstream, startReferenceUpstream } from '../support/reference-upstream/index.js';
import { removeTree } from '../support/remove-tree.js';

/**
 * openCapture: the one place polar run, rollout workers, gym-agent and polar proxy make the upstream,
 * learn the served model and its window, and start the proxy. A server listing several models must
 * give `--model` that model's own window, never the first's (the drift issue 27 found).
 */
let upstream: ReferenceUpstream;
/** A server without /v1/models (404 for every path), as some OpenAI-compatible servers are. */
let listless: { url: string; close: () => Promise<void> };
let store: Store;
let dir: string;

beforeAll(async () => {
  upstream = await startReferenceUpstream({ alsoListed: [{ id: 'policy', maxModelLen: 32_768 }] });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-open-capture-'));
  store = Store.open(path.join(dir, 'polar.db'));
  const server = http.createServer((_req, res) => res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  listless = { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
});

afterAll(async () => {
  await store?.closeAsync();
  await upstream?.close();
  await listless?.close();
  removeTree(dir);
});

const open = (options: Partial<Parameters<typeof openCapture>[0]> = {}) =>
  openCapture({ kind: 'vllm', upstream: { baseUrl: upstream.url }, proxy: { store, defaultSession: 'c-default' }, ...options });

async function withCapture(options: Partial<Parameters<typeof openCapture>[0]>, body: (c: Capture) => Promise<void>) {
  const c = await open(options);
  try {
    await body(c);
  } finally {
    await c.close(1000);
  }
}

const chat = (c: Capture) =>
  fetch(`${c.proxy.baseUrl()}/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: 'whatever-the-harness-says', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    headers: { 'content-type': 'application/json' },
  });

describe('openCapture', () => {
  it("serves --model with that model's own context window, not the first listed model's", async () => {
    await withCapture({ model: 'policy' }, async (c) => {
      expect(c.model).toBe('policy');
      expect(c.contextWindow).toBe(32_768);
      // The proxy in front serves that model: the upstream is asked for it, whatever the harness named.
      expect((await chat(c)).status).toBe(200);
      expect(upstream.calls.at(-1)?.body).toMatchObject({ model: 'policy' });
    });
  });

  it('takes the first listed model and its window when no model is named', async () => {
    await withCapture({}, async (c) => {
      expect(c.model).toBe('Qwen/Qwen3-8B');
      expect(c.contextWindow).toBe(MAX_MODEL_LEN);
    });
  });

  it('serves a model the upstream does not list as named, with no window', async () => {
    await withCapture({ model: 'an-alias' }, async (c) => {
      expect(c.model).toBe('an-alias');
      expect(c.contextWindow).toBeNull();
    });
  });

  // Issue 38: a rollout, worker or gym-agent renders the window into every first prompt, so a model
  // list that failed once (a server restarting when a worker started) must stop it, not silently
  // give that worker no window and its samples another first prompt. `polar run`/`proxy` go without.
  describe('where the window must be known (rollout, worker, gym-agent)', () => {
    it('refuses to start when the upstream lists no window for the model, naming both ways out', async () => {
      await expect(open({ model: 'an-alias', requireContextWindow: true })).rejects.toThrow(
        /context window of the served model is not known: .*lists no max_model_len for an-alias.*pass --context-window TOKENS.*or fix the upstream/,
      );
    });

    it('refuses to start when the model list cannot be read, with why', async () => {
      const refused = openCapture({
        kind: 'vllm',
        upstream: { baseUrl: listless.url },
        model: 'policy',
        requireContextWindow: true,
        proxy: { store, defaultSession: 'c-default' },
      });
      await expect(refused).rejects.toThrow(/its model list \(http:\/\/127\.0\.0\.1:\d+ \/v1\/models\) could not be read: .*pass --context-window/);
    });

    it('starts with --context-window whatever the list says, and with a listed max_model_len', async () => {
      await withCapture({ model: 'an-alias', contextWindow: 4096, requireContextWindow: true }, async (c) => expect(c.contextWindow).toBe(4096));
      await withCapture({ model: 'policy', requireContextWindow: true }, async (c) => expect(c.contextWindow).toBe(32_768));
    });
  });

  it('lets an explicit context window win over the listed one', async () => {
    await withCapture({ model: 'policy', contextWindow: 8192 }, async (c) => {
      expect(c.contextWindow).toBe(8192);
    });
  });

  it('hands the step that makes the proxy options the resolved model and window', async () => {
    const seen: { model: string | null; contextWindow: number | null }[] = [];
    await withCapture(
      {
        model: 'policy',
        proxy: ({ model, contextWindow }) => {
          seen.push({ model, contextWindow });
          return { store, defaultSession: 'c-default' };
        },
      },
      async () => undefined,
    );
    expect(seen).toEqual([{ model: 'policy', contextWindow: 32_768 }]);
  });

  // Issue 40: a harness started against a server nobody answers at retried 502s for minutes, and
  // without --model the run said to pass --model. Now the cause, at once, with or without a model.
  describe('an upstream nobody answers at', () => {
    // Port 9 (discard) refuses the connection: /v1/models fails at once.
    const dead = { kind: 'vllm', upstream: { baseUrl: 'http://127.0.0.1:9', connectTimeoutMs: 2000 } };

    it('refuses with the cause, with or without a model named, before any proxy listens', async () => {
      for (const model of [undefined, 'policy']) {
        const refused = open({ ...dead, ...(model ? { model } : {}), noModel: 'pass --model NAME' });
        await expect(refused).rejects.toMatchObject({
          code: 'POLAR_UPSTREAM_CONNECT',
          message: expect.stringMatching(/^cannot reach http:\/\/127\.0\.0\.1:9 \(ECONNREFUSED\): start the inference server there or correct --upstream/),
        });
      }
    });

    it('polar proxy (allowUnreachable) serves a named model without asking, and stays quiet about the list', async () => {
      const reasons: string[] = [];
      await withCapture(
        { ...dead, allowUnreachable: true, model: 'policy', noModel: 'pass --model NAME', onModelsError: (err) => reasons.push(err.message) },
        async (c) => {
          expect(c.model).toBe('policy');
          expect(c.contextWindow).toBeNull();
        },
      );
      expect(reasons).toEqual([]);
    });

    it('polar proxy (allowUnreachable) passes each call’s model through where no model is required', async () => {
      await withCapture({ ...dead, allowUnreachable: true }, async (c) => {
        expect(c.model).toBeNull();
        expect(c.proxy.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      });
    });
  });

  describe('an upstream that answers but lists no models', () => {
    it('refuses with the caller’s usage error when a model is required and none was named; says why once', async () => {
      const reasons: string[] = [];
      await expect(
        open({ upstream: { baseUrl: listless.url }, noModel: 'pass --model NAME', onModelsError: (err) => reasons.push(err.message) }),
      ).rejects.toMatchObject({
        code: 'POLAR_USAGE',
        message: 'pass --model NAME',
      });
      expect(reasons).toHaveLength(1);
    });

    it('serves a named model without asking, and stays quiet about the list', async () => {
      const reasons: string[] = [];
      await withCapture({ upstream: { baseUrl: listless.url }, model: 'policy', onModelsError: (err) => reasons.push(err.message) }, async (c) => {
        expect(c.model).toBe('policy');
        expect(c.contextWindow).toBeNull();
      });
      expect(reasons).toEqual([]);
    });
  });
});
