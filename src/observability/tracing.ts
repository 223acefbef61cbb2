// What the gateway asks of traces, and traces off: the SDK-backed implementation is in otel-tracing.ts.
import type { IncomingHttpHeaders } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

/** Span attribute values the gateway sets: names, kinds, counts and outcomes only (never a credential or an id). */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

export interface Tracing {
  readonly enabled: boolean;
  /**
   * Starts the request's server span (its parent the caller's W3C traceparent, when valid), runs the rest of the
   * pipeline in it, and ends it when the answer is finished; `res.locals.traceId` names its trace for the log line.
   */
  serve(req: Request, res: Response, next: NextFunction): void;
  /** A middleware run inside a child span of the request's span, ended when it passes on or answers. */
  around(name: string, handler: RequestHandler): RequestHandler;
  /** `work` inside a child span of the current one (none when no span is current); `describe` names its outcome. */
  inSpan<T>(
    name: string,
    work: () => Promise<T>,
    describe?: (result: T) => SpanAttributes,
    attributes?: SpanAttributes,
    kind?: 'internal' | 'client',
  ): Promise<T>;
  /** Work that belongs to no request (a background token refresh): the root span of a trace of its own. */
  background<T>(name: string, work: () => Promise<T>): Promise<T>;
  /** Adds `traceparent` for the current span to an upstream request, only with UPSTREAM_PROPAGATE_TRACE=true. */
  injectUpstream(headers: IncomingHttpHeaders): void;
  /** Exports the spans still buffered and stops (the last step of a graceful shutdown). */
  shutdown(): Promise<void>;
}

/** Tracing off: every call passes straight through, nothing is allocated and the SDK is never loaded. */
export const NO_TRACING: Tracing = {
  enabled: false,
  serve: (_req, _res, next) => next(),
  around: (_name, handler) => handler,
  inSpan: (_name, work) => work(),
  background: (_name, work) => work(),
  injectUpstream: () => undefined,
  shutdown: async () => undefined,
};
