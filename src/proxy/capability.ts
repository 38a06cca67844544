import type { IncomingMessage } from 'node:http';
import { sameSecret } from '../core/same-secret.js';
import type { Store } from '../store/store.js';
import { redactHeaders, redactPath } from '../store/redact.js';
import { presentedCredentials, type CallerIdentity } from './identity.js';
import type { RefusalReason, SessionKeys } from './session-keys.js';

/**
 * The capability check of a proxy with session keys: a call may write into session S only when it
 * presents S's key or the operator token. Where the session comes from (path, header, key) does not
 * matter; a key for A on `/s/B/` proves nothing about B. Null when the call may go on.
 */
export function capabilityProblem(req: IncomingMessage, identity: CallerIdentity, keys: SessionKeys, operatorToken: string | undefined): RefusalReason | null {
  const presented = presentedCredentials(req.headers, req.url);
  if (operatorToken && presented.some((p) => sameSecret(p, operatorToken))) return null;
  return keys.check(presented, identity.sessionId);
}

/** Records a refused call in the audit table; the session it named gets nothing. */
export function auditRefusal(store: Store, req: IncomingMessage, identity: CallerIdentity, reason: RefusalReason): void {
  store.audit.record({
    at: Date.now(),
    method: req.method ?? 'GET',
    path: redactPath(req.url ?? '/'),
    claimedSession: identity.sessionSource === 'default' ? null : identity.sessionId,
    reason,
    // A Unix-socket peer has no address.
    remote: req.socket.remoteAddress ?? 'unix',
    requestHeaders: redactHeaders(req.headers),
  });
}

/** What the caller is told: the reason, never which keys would have worked. */
export function refusalMessage(reason: RefusalReason, identity: CallerIdentity): string {
  const named = identity.sessionSource === 'default' ? 'this proxy' : `session ${JSON.stringify(identity.sessionId)}`;
  const why: Record<RefusalReason, string> = {
    'no-key': 'no API key was sent',
    'no-secret': 'the API key names a session but carries no secret',
    'bad-secret': "the API key's secret is not valid",
    'wrong-session': 'the API key is for another session',
    'unknown-key': 'the API key is not a polar session key',
  };
  return `${named} needs its own polar session key (${reason}: ${why[reason]})`;
}
