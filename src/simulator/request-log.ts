// The last operation requests exactly as they reached the simulator, so gateway tests can assert what it forwarded;
// and the headers of the last token endpoint requests (what else the gateway sends the provider).
import type { Request } from 'express';
import { normaliseIp } from './ip-allow-list';

export interface ReceivedRequest {
  method: string;
  /** Path without the query string. */
  path: string;
  /** Parsed query string ({} when none was sent). */
  query: Record<string, unknown>;
  /** Headers as received (lower-case names). */
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body; null when there was none or it was not valid JSON. */
  body: unknown;
  /** The TCP peer's address (normalised as the IP allow-list sees it): the egress address the caller used. */
  remoteAddress: string;
  /** The merchant account (username) whose token the call carried, read from its `user_id`; absent when none. */
  account?: string;
}

export interface RequestLog {
  record(req: Request, body: unknown, account?: string): void;
  list(): ReceivedRequest[];
  clear(): void;
}

export const REQUEST_LOG_CAPACITY = 200;

export function createRequestLog(capacity = REQUEST_LOG_CAPACITY): RequestLog {
  let entries: ReceivedRequest[] = [];
  return {
    record(req, body, account) {
      entries.push({
        method: req.method,
        path: req.path,
        query: { ...(req.query as Record<string, unknown>) },
        headers: { ...req.headers },
        body: body === undefined ? null : structuredClone(body),
        remoteAddress: normaliseIp(req.socket.remoteAddress ?? ''),
        ...(account !== undefined && { account }),
      });
      if (entries.length > capacity) entries = entries.slice(-capacity);
    },
    list: () => structuredClone(entries),
    clear() {
      entries = [];
    },
  };
}

/** A token endpoint request as received: its headers only, never its body (the password or the refresh token). */
export interface ReceivedTokenRequest {
  method: string;
  path: string;
  /** Headers as received (lower-case names). */
  headers: Record<string, string | string[] | undefined>;
  /** The TCP peer's address (normalised as the IP allow-list sees it): the egress address the caller used. */
  remoteAddress: string;
}

export interface TokenRequestLog {
  record(req: Request): void;
  list(): ReceivedTokenRequest[];
  clear(): void;
}

export function createTokenRequestLog(capacity = REQUEST_LOG_CAPACITY): TokenRequestLog {
  let entries: ReceivedTokenRequest[] = [];
  return {
    record(req) {
      entries.push({
        method: req.method,
        path: req.path,
        headers: { ...req.headers },
        remoteAddress: normaliseIp(req.socket.remoteAddress ?? ''),
      });
      if (entries.length > capacity) entries = entries.slice(-capacity);
    },
    list: () => structuredClone(entries),
    clear() {
      entries = [];
    },
  };
}
