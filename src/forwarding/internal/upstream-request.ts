// The request http-proxy-middleware is handed for one forwarded exchange, built from the exchange itself (its path,
// its method, the upstream headers): the caller's request is never handed over, so it is never changed.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'http-proxy-middleware';

/** What the request is built from: the route's own upstream path and method (never the caller's). */
export interface UpstreamTarget {
  readonly path: string;
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
}

/**
 * Everything http-proxy-middleware 4 and httpxy 0.5 read of their "incoming request" with the forwarder's options
 * (no pathFilter, router, pathRewrite, xfwd, timeout, forward, followRedirects or buffer; selfHandleResponse):
 * - `url`: matched against the default path filter ('/'), then sent as the upstream path;
 * - `method`, `headers`: copied (spread) onto the outgoing request;
 * - `httpVersionMajor`: above 1 would strip HTTP/2 pseudo-headers and drop the agent; this request is HTTP/1.1;
 * - `socket`: there is none, this request is on no connection. http-proxy-middleware then registers no server
 *   'close' listener, and httpxy reports an upstream ECONNRESET as 'econnreset' instead of 'error' (it would only
 *   with a writable caller socket): the forwarder treats both alike;
 * - `on('error', …)`: this request has no stream and never errors, so the listener is not kept;
 * - `pipe(outgoing)`: the body source. There is nothing to pipe: the forwarder sends the body, serialized once, with
 *   `proxyReq.end(body)` as the outgoing request gets its socket.
 * A subclass may add what it needs to find its own state in http-proxy-middleware's events (they hand back this
 * object), without an allocation of its own.
 */
export class UpstreamRequest {
  readonly url: string;
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

  /** `headers` is the complete upstream header set (header-policy.ts), never the caller's. */
  constructor(
    target: UpstreamTarget,
    readonly headers: Record<string, string>,
  ) {
    this.url = target.path;
    this.method = target.method;
  }

  // The constants are getters, on the prototype: no slot in each request.
  get httpVersion(): '1.1' {
    return '1.1';
  }

  get httpVersionMajor(): 1 {
    return 1;
  }

  get httpVersionMinor(): 1 {
    return 1;
  }

  get socket(): undefined {
    return undefined;
  }

  on(): this {
    return this;
  }

  pipe<Destination>(destination: Destination): Destination {
    return destination;
  }
}

/**
 * What httpxy gets as the response of an upstream attempt (selfHandleResponse: it never writes to it), not the
 * caller's: a caller who hangs up neither aborts a call that coalesced readers share nor counts as an upstream
 * failure. It only listens for 'close' and reads these flags; the answer is buffered and sent to the caller(s)
 * afterwards. Shared by every attempt: listeners are dropped (it never closes), and destroy() is a no-op. So the
 * proxy's promise never settles: the forwarder does not wait on it.
 */
export const DETACHED_RESPONSE = {
  destroyed: false,
  finished: false,
  writableFinished: false,
  headersSent: false,
  on() {
    return this;
  },
  once() {
    return this;
  },
  destroy() {
    return this;
  },
} as unknown as ServerResponse;

/**
 * The forwarder's http-proxy-middleware options besides its target, agent and plugins: what UpstreamRequest is
 * written against (no path filter, rewrite, router or X-Forwarded-*; the answer is the forwarder's to read).
 */
export const UPSTREAM_PROXY_OPTIONS = {
  changeOrigin: true,
  xfwd: false,
  selfHandleResponse: true,
  ejectPlugins: true,
} as const;

/** The proxy, as it is called here: with an UpstreamRequest and a response that is not the caller's. */
export type UpstreamProxy = (req: UpstreamRequest, res: ServerResponse) => Promise<unknown>;

/**
 * http-proxy-middleware's types ask for an IncomingMessage because it is written for servers; it reads no more of
 * it than UpstreamRequest has (see above). Retyped once, when the proxy is made, never per request.
 */
export function takingUpstreamRequests(
  proxy: RequestHandler<IncomingMessage, ServerResponse>,
): UpstreamProxy {
  return proxy as unknown as UpstreamProxy;
}
