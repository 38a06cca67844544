/**
 * Errors are thrown in the middle and rendered at the edge (the proxy's render-error, the CLI's
 * action wrapper). `code` is a stable string callers match on; `status` is the HTTP status the proxy
 * answers with when the error reaches a harness.
 */
export type PolarErrorCode =
  | 'POLAR_BAD_REQUEST'
  | 'POLAR_BODY_TOO_LARGE'
  | 'POLAR_NOT_FOUND'
  | 'POLAR_UNAUTHORIZED'
  | 'POLAR_FORBIDDEN'
  | 'POLAR_UPSTREAM_CONNECT'
  | 'POLAR_UPSTREAM_HEADERS_TIMEOUT'
  | 'POLAR_UPSTREAM_BODY_TIMEOUT'
  | 'POLAR_UPSTREAM_STATUS'
  | 'POLAR_UPSTREAM_PROTOCOL'
  | 'POLAR_CLIENT_ABORTED'
  | 'POLAR_STORE_WRITE'
  | 'POLAR_STORE_UNREACHABLE'
  | 'POLAR_USAGE'
  | 'POLAR_BRIDGE_CHECK'
  | 'POLAR_INTERRUPTED'
  | 'POLAR_EMPTY_EXPORT'
  | 'POLAR_PAUSED'
  | 'POLAR_INTERNAL';

export class PolarError extends Error {
  override name = 'PolarError';
  /** The request field at fault, when there is one (OpenAI's `param`). */
  readonly param: string | undefined;
  constructor(
    readonly code: PolarErrorCode,
    message: string,
    readonly status = 500,
    options?: { cause?: unknown; param?: string },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.param = options?.param;
  }
}

/**
 * An upstream answered with an error status; its body is kept to show the harness what went wrong.
 * A 4xx keeps its status (a too-long prompt is the caller's to fix, and harnesses match on it);
 * a 5xx becomes 502, since the fault is behind the proxy.
 */
export class UpstreamStatusError extends PolarError {
  override name = 'UpstreamStatusError';
  constructor(
    readonly upstreamStatus: number,
    readonly upstreamBody: string,
  ) {
    super('POLAR_UPSTREAM_STATUS', upstreamStatusMessage(upstreamStatus, upstreamBody), upstreamStatus >= 400 && upstreamStatus < 500 ? upstreamStatus : 502);
  }
}

function upstreamStatusMessage(status: number, body: string): string {
  const detail = extractErrorMessage(body);
  return `upstream answered HTTP ${status}${detail ? `: ${detail}` : ''}`;
}

/** Pull a human-readable message out of an upstream error body (OpenAI/vLLM shape or plain text). */
export function extractErrorMessage(body: string): string {
  const text = body.trim();
  if (!text) return '';
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object') {
      const obj = parsed as Record<string, unknown>;
      const inner = obj.error && typeof obj.error === 'object' ? (obj.error as Record<string, unknown>) : obj;
      if (typeof inner.message === 'string') return inner.message;
      if (typeof obj.error === 'string') return obj.error;
      if (typeof obj.detail === 'string') return obj.detail;
    }
  } catch {
    // not JSON: fall through to the raw text
  }
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}
