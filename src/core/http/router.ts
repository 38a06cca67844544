/**
 * The routing every polar HTTP server shares (the capture proxy's session paths, mock-server,
 * `replay --serve`, `gym-agent`): a method and a path pattern name a handler. A pattern is exact
 * segments, `:name` segments (one segment, percent-decoded, into `params.name`), and an optional
 * last `*` (the rest of the path, from its `/`, into `params['*']`). Exact paths are one map lookup
 * (the hot path); patterns are tried in the order they were added. Handlers are whatever the
 * server's own type is (`H`), so each server keeps its own context and reply shapes; the router
 * only says which handler, with what params, or why none (404, or 405 with the methods the path
 * has), and the server answers that in its own API's shape.
 */
export type Params = Readonly<Record<string, string>>;

export type RouteMatch<H> =
  | { found: true; handler: H; params: Params }
  /** `allowed`: the methods the path does serve (empty: no route has the path at all, a 404). */
  | { found: false; allowed: readonly string[] };

interface Pattern<H> {
  readonly segments: readonly string[];
  /** Ends in `*`: matches any longer path too. */
  readonly rest: boolean;
  readonly methods: Map<string, H>;
}

const NO_PARAMS: Params = Object.freeze({});

export class Router<H> {
  private readonly exact = new Map<string, Map<string, H>>();
  private readonly patterns: Pattern<H>[] = [];

  /** Adds a route; `method` may be a list (`['GET', 'HEAD']`). A later route for the same method and pattern replaces it. */
  on(method: string | readonly string[], pattern: string, handler: H): this {
    const methods = typeof method === 'string' ? [method] : method;
    const table = this.tableFor(pattern);
    for (const m of methods) table.set(m.toUpperCase(), handler);
    return this;
  }

  /** The handler for `method` on `path` (a path only: the caller strips any query). */
  match(method: string, path: string): RouteMatch<H> {
    const table = this.exact.get(path);
    if (table) {
      const handler = table.get(method);
      if (handler !== undefined) return { found: true, handler, params: NO_PARAMS };
    }
    let allowed: string[] = table ? [...table.keys()] : [];
    if (this.patterns.length === 0) return { found: false, allowed };
    const parts = path.split('/');
    for (const pattern of this.patterns) {
      const params = matchSegments(pattern, parts);
      if (!params) continue;
      const handler = pattern.methods.get(method);
      if (handler !== undefined) return { found: true, handler, params };
      allowed = [...allowed, ...pattern.methods.keys()];
    }
    return { found: false, allowed: [...new Set(allowed)] };
  }

  private tableFor(pattern: string): Map<string, H> {
    if (!pattern.startsWith('/')) throw new Error(`a route pattern starts with /: ${JSON.stringify(pattern)}`);
    const segments = pattern.split('/');
    const rest = segments[segments.length - 1] === '*';
    if (rest) segments.pop();
    if (!rest && !segments.some((s) => s.startsWith(':'))) {
      let table = this.exact.get(pattern);
      if (!table) this.exact.set(pattern, (table = new Map()));
      return table;
    }
    const same = this.patterns.find((p) => p.rest === rest && p.segments.join('/') === segments.join('/'));
    if (same) return same.methods;
    const added: Pattern<H> = { segments, rest, methods: new Map() };
    this.patterns.push(added);
    return added.methods;
  }
}

/** The params of `parts` (a path split on `/`) under `pattern`, or null when it does not match. */
function matchSegments<H>(pattern: Pattern<H>, parts: readonly string[]): Params | null {
  const { segments, rest } = pattern;
  if (rest ? parts.length <= segments.length : parts.length !== segments.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const want = segments[i]!;
    const got = parts[i]!;
    if (want.startsWith(':')) {
      if (got === '') return null;
      params[want.slice(1)] = safeDecode(got);
    } else if (want !== got) return null;
  }
  if (rest) params['*'] = `/${parts.slice(segments.length).join('/')}`;
  return params;
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** The path of a request target, without its query. */
export function pathOf(url: string | undefined): string {
  const target = url ?? '/';
  const q = target.indexOf('?');
  return q < 0 ? target : target.slice(0, q);
}
