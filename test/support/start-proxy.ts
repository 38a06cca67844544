import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startProxy, type ProxyOptions, type RunningProxy } from '../../src/proxy/server.js';
import { Store } from '../../src/store/store.js';
import { createUpstream, type UpstreamOptions } from '../../src/upstream/create.js';
import type { Upstream } from '../../src/upstream/types.js';
import { removeTree } from './remove-tree.js';

export interface TestProxy {
  proxy: RunningProxy;
  store: Store;
  upstream: Upstream;
  dbPath: string;
  dir: string;
  session: string;
  close(): Promise<void>;
}

/** A real proxy on 127.0.0.1:0 over a real SQLite file in a fresh temp dir. */
export async function startTestProxy(
  upstreamUrl: string,
  options: Partial<Omit<ProxyOptions, 'store' | 'upstream'>> & {
    upstreamKind?: string;
    upstreamTimeoutMs?: number;
    upstreamOptions?: Omit<UpstreamOptions, 'baseUrl'>;
  } = {},
): Promise<TestProxy> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-test-'));
  const dbPath = path.join(dir, 'polar.db');
  const store = Store.open(dbPath);
  const upstream = await createUpstream(options.upstreamKind ?? 'vllm', {
    baseUrl: upstreamUrl,
    connectTimeoutMs: 2000,
    ...options.upstreamOptions,
    ...(options.upstreamTimeoutMs ? { headersTimeoutMs: options.upstreamTimeoutMs, bodyTimeoutMs: options.upstreamTimeoutMs } : {}),
  });
  const session = options.defaultSession ?? 'test-session';
  const proxy = await startProxy({
    servedModel: 'Qwen/Qwen3-8B',
    ...options,
    store,
    upstream,
    defaultSession: session,
  });
  return {
    proxy,
    store,
    upstream,
    dbPath,
    dir,
    session,
    async close() {
      await proxy.close(1000);
      await upstream.close();
      store.close();
      removeTree(dir);
    },
  };
}
