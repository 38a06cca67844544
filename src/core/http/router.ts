/**
 * The routing polar's fixed-API HTTP servers share (mock-server, `replay --serve`, `gym-agent`): a
 * method and a path pattern name a handler. The capture proxy does not route through it: its own
 * classifier (src/proxy/route.ts `matchRoute`) names the API by a path's suffix under any prefix, by
 * Google's `:method` segment, and for a POST to an unknown path by the body's shape, none of which a
 * method + pattern table says (bench/RESULTS.md, "HTTP routing layer: the choice"). A pattern is exact
 * segments, `:name` segments (one non-empty segment, percent-decoded, into `params.name`), and an
 * optional last `*` (the rest of the path, from its `/`, into `params['*']`). An exact path is one
 * map lookup; patterns live in a tree of segments, where an exact segment wins over a `:param`, and
 * a `:param` over `*`. Handlers are whatever the server's own type is (`H`), so each server keeps its
 * own context and reply shapes; the router only says which handler, with what params, or why none
 * (404, or 405 with the methods the path has), and the server answers that in its own API's shape.
 * Measured against Hono's router and node adapter on the proxy's request lines: bench/router.ts.
 */
export type Params = Readonly<Record<string, string>>;

export type RouteMatch<H> =
  | { found: true; handler: H; params: Params }
  /** `allowed`: the methods the path does serve (empty: no route has the path at all, a 404). */
  | { found: false; allowed: readonly string[] };

/** A route's handler and the names of its `:params`, in path order. */
interface Leaf<H> {
  readonly handler: H;
  readonly names: readonly string[];
}

interface Node<H> {
  readonly statics: Map<string, Node<H>>;
  param: Node<H> | null;
  /** Routes ending here, by method. */
  readonly here: Map<string, Leaf<H>>;
  /** Routes ending in `*` here, by method. */
  readonly rest: Map<string, Leaf<H>>;
}

const NO_PARAMS: Params = Object.freeze({});

function node<H>(): Node<H> {
  return { statics: new Map(), param: null, here: new Map(), rest: new Map() };
}

export class Router<H> {
  private readonly exact = new Map<string, Map<string, H>>();
  private readonly root: Node<H> = node();
  private patterns = 0;

  /** Adds a route; `method` may be a list (`['GET', 'HEAD']`). A later route for the same method and pattern replaces it. */
  on(method: string | readonly string[], pattern: string, handler: H): this {
    if (!pattern.startsWith('/')) throw new Error(`a route pattern starts with /: ${JSON.stringify(pattern)}`);
    const methods = (typeof method === 'string' ? [method] : method).map((m) => m.toUpperCase());
    const segments = pattern.split('/').slice(1);
    if (!segments.some((s) => s === '*' || s.startsWith(':'))) {
      let table = this.exact.get(pattern);
      if (!table) this.exact.set(pattern, (table = new Map()));
      for (const m of methods) table.set(m, handler);
      return this;
    }
    const rest = segments[segments.length - 1] === '*';
    if (rest) segments.pop();
    let at = this.root;
    const names: string[] = [];
    for (const s of segments) {
      if (s.startsWith(':')) {
        names.push(s.slice(1));
        at = at.param ??= node();
      } else {
        let next = at.statics.get(s);
        if (!next) at.statics.set(s, (next = node()));
        at = next;
      }
    }
    for (const m of methods) (rest ? at.rest : at.here).set(m, { handler, names });
    this.patterns++;
    return this;
  }

  /** The handler for `method` on `path` (a path only: the caller strips any query). */
  match(method: string, path: string): RouteMatch<H> {
    const table = this.exact.get(path);
    if (table) {
      const handler = table.get(method);
      if (handler !== undefined) return { found: true, handler, params: NO_PARAMS };
    }
    if (this.patterns === 0) return { found: false, allowed: table ? [...table.keys()] : [] };
    const parts = path.split('/');
    const found = walk(this.root, parts, 1, [], method, null);
    if (found) return { found: true, handler: found.leaf.handler, params: paramsOf(found) };
    // A miss: walked again, only now collecting the methods the path does have.
    const allowed = new Set<string>(table ? table.keys() : []);
    walk(this.root, parts, 1, [], '', allowed);
    return { found: false, allowed: [...allowed] };
  }
}

interface Found<H> {
  leaf: Leaf<H>;
  values: readonly string[];
  /** The rest of the path, for a `*` route. */
  rest: string | null;
}

/**
 * The route for `method` under `at` for `parts[i..]`: an exact segment first, then a `:param`, then
 * a `*`. With `allowed`, each route the path matches, whatever its method, adds its methods (for a 405).
 */
function walk<H>(at: Node<H>, parts: readonly string[], i: number, values: string[], method: string, allowed: Set<string> | null): Found<H> | null {
  if (i === parts.length) {
    const leaf = at.here.get(method);
    if (leaf) return { leaf, values: [...values], rest: null };
    if (allowed) for (const m of at.here.keys()) allowed.add(m);
    return null;
  }
  const part = parts[i]!;
  const exact = at.statics.get(part);
  const viaExact = exact ? walk(exact, parts, i + 1, values, method, allowed) : null;
  if (viaExact) return viaExact;
  if (at.param && part !== '') {
    values.push(part);
    const viaParam = walk(at.param, parts, i + 1, values, method, allowed);
    values.pop();
    if (viaParam) return viaParam;
  }
  if (at.rest.size > 0) {
    const leaf = at.rest.get(method);
    if (leaf) return { leaf, values: [...values], rest: `/${parts.slice(i).join('/')}` };
    if (allowed) for (const m of at.rest.keys()) allowed.add(m);
  }
  return null;
}

function paramsOf<H>({ leaf, values, rest }: Found<H>): Params {
  const params: Record<string, string> = {};
  for (let k = 0; k < leaf.names.length; k++) {
    const value = values[k]!;
    params[leaf.names[k]!] = value.includes('%') ? safeDecode(value) : value;
  }
  if (rest !== null) params['*'] = rest;
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
