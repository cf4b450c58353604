/**
 * The worker's HTTP routes: `GET` paths with `:name` segments (`/flows/:flow/keys/:key`), each
 * segment URL-decoded after the path is split (a key with `/` in it arrives as `%2F`). Pure: the
 * server (server.ts) hands it a method and a URL and writes back what it answers.
 */

export interface HttpRequest {
  /** The `:name` segments of the route, decoded. */
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
}

export interface HttpReply {
  readonly status: number;
  readonly body: string;
  readonly contentType: string;
}

export type Handler = (request: HttpRequest) => HttpReply | Promise<HttpReply>;

/** A JSON reply (one line, newline-terminated). */
export const json = (status: number, body: unknown): HttpReply => ({ status, body: `${JSON.stringify(body)}\n`, contentType: 'application/json' });

/** A reply to a request the router or a handler refuses: `{ error, message }`. */
export const failure = (status: number, error: string, message: string): HttpReply => json(status, { error, message });

interface Route {
  readonly pattern: string;
  readonly segments: readonly string[];
  readonly handler: Handler;
}

export class Router {
  private readonly routes: Route[] = [];

  /** @param onError told of what a handler threw (the 500s), e.g. to log it. */
  constructor(private readonly onError: (err: unknown) => void = () => undefined) {}

  /** Answers `GET` (and `HEAD`) of `pattern`; a segment `:name` matches any one segment. */
  get(pattern: string, handler: Handler): this {
    this.routes.push({ pattern, segments: pattern.split('/').slice(1), handler });
    return this;
  }

  /** The routes, as registered (the 404 names them). */
  patterns(): string[] {
    return this.routes.map((r) => r.pattern);
  }

  /**
   * The reply to `method url`: the matching route's, 404 naming the routes when none matches, 405
   * for a method other than GET/HEAD, 400 for a segment that is not valid URL encoding, 500 (the
   * error's class only: a message may quote a key) when the handler throws something it did not
   * turn into a reply.
   */
  async handle(method: string, url: string): Promise<HttpReply> {
    const parsed = new URL(url, 'http://localhost');
    const segments = parsed.pathname.split('/').slice(1);
    for (const route of this.routes) {
      const raw = match(route.segments, segments);
      if (raw === undefined) continue;
      if (method !== 'GET' && method !== 'HEAD') return failure(405, 'MethodNotAllowed', `${route.pattern} answers GET only`);
      const params: Record<string, string> = {};
      for (const [name, value] of Object.entries(raw)) {
        try {
          params[name] = decodeURIComponent(value);
        } catch {
          return failure(400, 'BadRequest', `the ${name} segment is not valid URL encoding (percent-encode it, e.g. with encodeURIComponent)`);
        }
      }
      try {
        return await route.handler({ params, query: parsed.searchParams });
      } catch (err) {
        this.onError(err);
        return failure(500, err instanceof Error ? err.name : 'Error', 'the request failed; the worker log has the detail');
      }
    }
    return failure(404, 'NotFound', `no such path; this server answers ${this.patterns().join(', ')}`);
  }
}

/** The raw (still encoded) `:name` segments when `path` matches `pattern`, else undefined. */
function match(pattern: readonly string[], path: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== path.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    const s = path[i]!;
    if (p.startsWith(':')) {
      if (s === '') return undefined;
      params[p.slice(1)] = s;
    } else if (p !== s) return undefined;
  }
  return params;
}
