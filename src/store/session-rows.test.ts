import { expect, it } from 'vitest';
import { Store } from './store.js';

it('sessions.rows() is list() without the counts: the same sessions, fields and order, whatever their calls', () => {
  const store = Store.open(':memory:');
  // Two sessions created in the same millisecond are ordered by id, as list() orders them.
  store.db.prepare(`INSERT INTO sessions (id, created_at, metadata) VALUES ('b', 5, '{"replay_of":"x"}'), ('a', 5, '{}'), ('c', 1, '{}')`).run();
  store.requests.begin({
    id: 'r1',
    sessionId: 'a',
    agentId: 'main',
    provider: 'openai-chat',
    method: 'POST',
    path: '/v1/chat/completions',
    startedAt: 1,
    streamed: false,
    requestHeaders: {},
    requestedModel: 'm',
    servedModel: 'm',
  });
  store.sessions.end('c', 'timeout');
  const rows = store.sessions.rows();
  expect(rows.map((s) => s.id)).toEqual(['c', 'a', 'b']);
  expect(rows).toEqual(store.sessions.list().map(({ requests, failed, promptTokens, sampledTokens, lastCallAt, bridgedCalls, fullRenders, ...row }) => row));
  expect(rows[0]!.status).toBe('timeout');
  expect(rows[2]!.metadata).toEqual({ replay_of: 'x' });
  store.close();
});
