import type { IncomingMessage } from 'node:http';
import { isValidSessionName, newId } from '../core/ids.js';
import { redactHeaders, redactPath, secretValues } from '../store/redact.js';
import type { Upstream } from '../upstream/types.js';
import { CallRecord } from './call-record.js';
import type { ProxyContext } from './context.js';
import type { CallerIdentity } from './identity.js';

/**
 * Where a call lands in the store: its session's row, made or updated when the call arrives, and
 * the call's own record (call-record.ts writes that row later, once the request went upstream).
 * Only calls the proxy accepted or answers with a recorded error get here; admission.ts turns the
 * others away first.
 */

/** Sessions served by a token-in upstream name the tokenizer that rendered them (verify reads it). */
export function tokenizerField(upstream: Upstream): { tokenizer?: string } {
  return upstream.tokenizer ? { tokenizer: upstream.tokenizer } : {};
}

/** A call's record, its session's row written first. */
export function newCall(ctx: ProxyContext, req: IncomingMessage, identity: CallerIdentity, provider: string): CallRecord {
  const { options, store } = ctx;
  // Ends an earlier call could not write (a full disk since freed) go first.
  CallRecord.writeUnrecorded(store);
  const sessionId = sessionRow(ctx, identity);
  return new CallRecord(
    store,
    {
      id: newId('req'),
      sessionId,
      agentId: identity.agentId,
      provider,
      method: req.method ?? 'GET',
      path: redactPath(req.url ?? '/'),
      startedAt: Date.now(),
      streamed: false,
      requestHeaders: redactHeaders(req.headers),
      originalRequest: null,
      upstreamRequest: null,
      requestedModel: null,
      servedModel: null,
      policyVersion: ctx.admin.policyVersion,
    },
    secretValues(req.headers, req.url),
    options.onCall,
  );
}

/** The session a call is filed under (the default one when it named none valid), its row made or brought up to date. */
function sessionRow({ options, store }: ProxyContext, identity: CallerIdentity): string {
  const sessionId = isValidSessionName(identity.sessionId) ? identity.sessionId : options.defaultSession;
  if (sessionId === options.defaultSession) {
    // Made when a call first lands there, not at start: a rollout's `…-unattributed` session
    // stayed empty in `polar sessions` for every rollout whose calls all named their sessions.
    store.sessions.ensure(sessionId, {
      upstreamUrl: options.upstream.baseUrl,
      servedModel: options.servedModel,
      cwd: process.cwd(),
      metadata: tokenizerField(options.upstream),
    });
  } else {
    store.sessions.ensure(sessionId, {
      upstreamUrl: options.upstream.baseUrl,
      servedModel: options.servedModel,
      metadata: { created_by: 'proxy', session_source: identity.sessionSource, ...tokenizerField(options.upstream) },
    });
  }
  // The session may have been made before its first call without it (polar run --proxy, a rollout stage).
  if (options.upstream.tokenizer) store.sessions.recordTokenizer(sessionId, options.upstream.tokenizer);
  return sessionId;
}
