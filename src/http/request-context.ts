// The first middleware of every request: its id, its log line and metrics, and the markers every answer carries.
import { isIP } from 'node:net';
import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import type { Logger } from 'pino';
import type { Metrics } from '../observability/metrics';
import { requestObserver } from '../observability/request-log';
import { NO_TRACING, type Tracing } from '../observability/tracing';
import { closesAfterAnswer, markClosing } from './closing-connection';
import { headRefusal } from './protocol-errors';
import { assignRequestId } from './request-id';

export interface RequestContextOptions {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Readiness, as far as a request needs it: a draining replica asks keep-alive callers to reconnect elsewhere. */
  readonly readiness: { readonly draining: boolean };
  /** Starts the request's server span (NO_TRACING: none). */
  readonly tracing?: Tracing;
  /** Told of every finished request (the usage ledger's hook). */
  readonly onFinished?: (req: Request, res: Response) => void;
}

/**
 * One middleware for the per-request concerns that always run (one router layer instead of five on the hot path), in
 * this order: the request id, the request log and metrics, the draining marker. The headers every answer carries are
 * added as its head is written (answer-head.ts). It answers one request itself, one whose head must be refused
 * (over 100 header fields; a Host missing, several or invalid), and drops one: a request pipelined behind an answer
 * that closes the connection (closing-connection.ts).
 */
export function requestContext(options: RequestContextOptions): RequestHandler {
  const observe = requestObserver(options.logger, options.metrics, options.onFinished);
  const { readiness } = options;
  const tracing = options.tracing ?? NO_TRACING;
  return (req, res, next) => {
    // Pipelined behind an answer that closes the connection: never answered (Node drops it), so never run.
    if (closesAfterAnswer(req.socket)) return;
    assignRequestId(req, res);
    observe(req, res);
    if (readiness.draining) markDraining(res);
    const refused = headRefusal(req);
    if (refused) {
      markClosing(req.socket);
      next(refused);
    } else tracing.serve(req, res, next);
  };
}

/** While draining, answers close their connection so load balancers move callers to other replicas. */
function markDraining(res: Response): void {
  res.setHeader('connection', 'close');
  markClosing(res.req.socket);
}

const CLIENT_IP = Symbol('clientIp');
type RemembersIp = Request & { [CLIENT_IP]?: string };

/**
 * `req.ip` as every limit, log line and allow-list reads it: worked out once per request instead of on every read
 * (Express runs the 'trust proxy' function and parses X-Forwarded-For each time), and always an address, see
 * {@link clientAddress}.
 */
export function rememberClientIp(app: Express): void {
  const computeIp = Object.getOwnPropertyDescriptor(express.request, 'ip')?.get;
  if (!computeIp) throw new Error("Express's request has no ip getter to wrap");
  // proxy-addr judges each X-Forwarded-For entry as written: a trusted proxy that the next one wrote with its port
  // (`10.0.4.7:4444`) would be no proxy, and every caller behind it one address (its). Judged without the port.
  const trust = app.get('trust proxy fn') as (address: string, hop: number) => boolean;
  app.set('trust proxy fn', (address: string, hop: number) => trust(withoutPort(address), hop));
  Object.defineProperty(app.request, 'ip', {
    configurable: true,
    enumerable: true,
    get(this: RemembersIp): string | undefined {
      const remembered = this[CLIENT_IP];
      if (remembered !== undefined) return remembered;
      const ip = clientAddress(computeIp.call(this) as string | undefined, this.socket.remoteAddress);
      this[CLIENT_IP] = ip;
      return ip;
    },
  });
}

const IPV4_WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/;
const BRACKETED_IPV6 = /^\[([^\]]+)\](?::\d{1,5})?$/;

/**
 * The address Express names (`forwarded`), without a port, or the socket's when it names no valid address. Express
 * takes an X-Forwarded-For entry as it is written, and some load balancers write `203.0.113.9:41234` or
 * `[2001:db8::1]:443`: as a limiter key each port would be a new caller (issue 42), and the allow-list could not
 * read it. Whatever still is no IP address (`unknown`, garbage from a misconfigured proxy) is not a caller's
 * address either: the socket's peer stands in, as if no proxy had spoken.
 */
export function clientAddress(
  forwarded: string | undefined,
  socketAddress: string | undefined,
): string | undefined {
  if (forwarded === undefined) return socketAddress;
  const address = withoutPort(forwarded);
  return isIP(address) !== 0 ? address : socketAddress;
}

/** An address written with a port (`a.b.c.d:port`, `[v6]:port`) or in brackets, without them; else as it is. */
function withoutPort(written: string): string {
  return IPV4_WITH_PORT.exec(written)?.[1] ?? BRACKETED_IPV6.exec(written)?.[1] ?? written;
}
