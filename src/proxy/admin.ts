import type { IncomingMessage, ServerResponse } from 'node:http';
import { PolarError } from '../core/errors.js';
import { readBody } from '../core/http/body.js';
import { tokenPresented } from '../core/http/guard.js';
import type { PauseGate } from './pause.js';
import { sendJson } from '../core/http/send.js';

/** The proxy state a trainer drives between steps. */
export interface AdminState {
  gate: PauseGate;
  policyVersion: string | null;
}

/**
 * The trainer's side of the proxy, around weight updates:
 * - `POST /admin/pause` `{"drain_timeout_seconds"?: S}`: new model calls wait; answers once the calls
 *   in flight have finished (or after S, default 300, with `drained: false`);
 * - `POST /admin/resume`: waiting calls go on;
 * - `POST /admin/policy-version` `{"version": V}`: every call from now on records V;
 * - `GET /admin/status`: paused, in-flight calls, policy version.
 * They always need a token: the proxy's auth token, or the admin token `polar proxy` writes 0600
 * into its state folder when it has none (admin-token.ts). Being on this machine proves nothing: a
 * policy's sandboxed rollout, another user, or a web page's request all come from loopback.
 */
export async function handleAdmin(
  req: IncomingMessage,
  res: ServerResponse,
  action: 'pause' | 'resume' | 'policy-version' | 'status',
  state: AdminState,
): Promise<void> {
  const status = () => ({
    ok: true,
    paused: state.gate.isPaused,
    paused_since: state.gate.pausedAt,
    in_flight: state.gate.inFlight,
    policy_version: state.policyVersion,
  });
  switch (action) {
    case 'status':
      req.resume();
      sendJson(res, 200, status());
      return;
    case 'resume':
      req.resume();
      state.gate.resume();
      sendJson(res, 200, status());
      return;
    case 'pause': {
      const body = await jsonBody(req);
      const seconds = typeof body.drain_timeout_seconds === 'number' && body.drain_timeout_seconds >= 0 ? body.drain_timeout_seconds : 300;
      state.gate.pause();
      const drained = await state.gate.drained(seconds * 1000);
      sendJson(res, 200, { ...status(), drained });
      return;
    }
    case 'policy-version': {
      const body = await jsonBody(req);
      const version = body.version;
      if ((typeof version !== 'string' && typeof version !== 'number') || String(version).length === 0 || String(version).length > 200) {
        throw new PolarError('POLAR_BAD_REQUEST', 'send {"version": V}: the policy version (a string or number) that serves calls from now on', 400);
      }
      state.policyVersion = String(version);
      sendJson(res, 200, status());
    }
  }
}

/** Whether a request presents one of the tokens that open admin routes (none set: nothing opens them). */
export function adminAuthorized(req: IncomingMessage, tokens: readonly (string | null | undefined)[]): boolean {
  return tokens.some((t) => typeof t === 'string' && t.length > 0 && tokenPresented(req.headers, t));
}

async function jsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const text = await readBody(req, 64 * 1024);
  if (text.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch (err) {
    throw new PolarError('POLAR_BAD_REQUEST', 'admin request body is not valid JSON', 400, { cause: err });
  }
}
