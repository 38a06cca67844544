import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../store/store.js';
import { summarize } from './run-rollout.js';
import { groupStats } from './stats.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** A store holding one rollout of task `t` × 2 whose samples ran in sessions with the given `network`s. */
function rolloutWith(config: Record<string, unknown>, networks: string[]): { store: Store; id: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polar-summary-'));
  dirs.push(dir);
  const store = Store.open(path.join(dir, 'polar.db'));
  const id = 'rol_net';
  const task = { id: 't', prompt: 'p', workspace: { empty: true }, evaluator: { type: 'command', command: 'true' } };
  store.rollouts.create(
    {
      id,
      harness: 'custom',
      upstreamUrl: null,
      upstreamKind: 'vllm-tito',
      servedModel: null,
      samplesPerTask: networks.length,
      tasksFile: null,
      accept: null,
      config,
    },
    [{ id: 't', json: JSON.stringify(task) }],
  );
  networks.forEach((network, i) => {
    const sessionId = `ses_${i}`;
    store.sessions.ensure(sessionId, { harness: 'custom', metadata: { sandbox: network === 'host' ? 'none' : 'bwrap', network } });
    const sample = `${id}:t:${i}`;
    store.rollouts.start(sample, sessionId);
    store.rollouts.finish(sample, { status: 'completed', reward: 1 }, groupStats);
  });
  return { store, id };
}

describe('the summary says which samples had the host network', () => {
  it("a queued rollout: each sample's own session, not the coordinator's --sandbox (issue 43: it claimed every sample)", () => {
    // The coordinator of a queued rollout stores sandbox 'none' (flags.ts queuedArgs); its workers sandboxed.
    const { store, id } = rolloutWith({ sandbox: 'none', queue: { retries: 2, heartbeatSec: 30 } }, ['none', 'host']);
    try {
      expect(summarize(store, id, 'db', 1).hostNetwork).toEqual([`${id}:t:1`]);
    } finally {
      store.close();
    }
  });

  it("a local rollout: this machine's settings, as before", () => {
    const { store, id } = rolloutWith({ sandbox: 'none' }, ['none', 'none']);
    try {
      expect(summarize(store, id, 'db', 1).hostNetwork).toEqual([`${id}:t:0`, `${id}:t:1`]);
    } finally {
      store.close();
    }
  });
});
