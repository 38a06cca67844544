import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TASK } from './support.js';

/**
 * What Polar's trainer bridges do against `polar serve` (fixtures/polar-api/clients.md): submit a
 * TaskRequest, poll its TaskStatus, listen for the TaskResult at a callback URL.
 */
export type Json = Record<string, any>;

export function serveClient(url: () => string) {
  const post = async (body: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${url()}/rollout/task/submit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const get = async (id: string) => (await fetch(`${url()}/rollout/task/${id}`)).json() as Promise<Json>;
  /** Polls as Slime's eval loop does until the task is no longer running. */
  const settled = async (id: string): Promise<Json> => {
    for (;;) {
      const s = await get(id);
      if (s.status !== 'running' && s.status !== 'cancelling') return s;
      await new Promise((r) => setTimeout(r, 1000));
    }
  };
  return { post, get, settled };
}

/** A TaskRequest shaped as Slime's bridge renders its swegym template (codex, prefix_merging, session_completed, 2 samples). */
export function slimeRequest(callbackUrl: string | null, taskId: string, extra: Json = {}): Json {
  return {
    task_id: taskId,
    instruction: TASK,
    num_samples: 2,
    timeout_seconds: 600,
    agent: { harness: 'codex', model_name: 'gpt-5.4', settings: { version: '' } },
    builder: { strategy: 'prefix_merging' },
    evaluator: { strategy: 'session_completed' },
    metadata: { group_id: 29, policy_version: 3, rollout_step: 3 },
    callback_url: callbackUrl,
    ...extra,
  };
}

/** The bridge's listener (Slime rollout.py `_start_callback_listener`): POST /callback/task_result; this one fails its first delivery. */
export async function callbackListener(): Promise<{ url: string; callbacks: { status: number; body: Json }[]; close(): Promise<void> }> {
  const callbacks: { status: number; body: Json }[] = [];
  const listener = http.createServer((req, res) => {
    let text = '';
    req.on('data', (d) => (text += d));
    req.on('end', () => {
      const status = callbacks.length === 0 ? 503 : 200;
      callbacks.push({ status, body: JSON.parse(text) as Json });
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: status === 200 }));
    });
  });
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(listener.address() as AddressInfo).port}/callback/task_result`,
    callbacks,
    close: () => new Promise<void>((r) => listener.close(() => r())),
  };
}
