// Every Redis key the gateway writes, built from REDIS_KEY_PREFIX and the upstream: the layout in one place.
import { sha256Base64Url, sha256Hex } from './hash';

/** Store names of one credential's pair. They share the hash tag in braces: one Redis Cluster slot. */
export interface TokenKeys {
  readonly pair: string;
  readonly lock: string;
  /** The last refusal of the credentials (401/403): the long back-off. */
  readonly failure: string;
  /** The last transient failure of the token endpoints (5xx, timeout, 429): the short back-off. */
  readonly transient: string;
  readonly channel: string;
}

/** Sandbox and production, or two merchants, never share a pair; a new username gets new keys. */
export function tokenKeys(keyPrefix: string, upstreamBaseUrl: string, username: string): TokenKeys {
  const base = `${keyPrefix}{token:${shortHash(`${upstreamBaseUrl}\n${username}`)}}`;
  return {
    pair: `${base}:pair`,
    lock: `${base}:lock`,
    failure: `${base}:failure`,
    transient: `${base}:transient`,
    channel: `${base}:changed`,
  };
}

/**
 * Cached answers are namespaced by upstream, account and the username the account logs in with: sandbox and
 * production never share a plan, neither do two merchant accounts at the same base URL (a plan answer is the
 * merchant's own), nor an account id before and after its credentials name another merchant.
 */
export function planCachePrefix(
  keyPrefix: string,
  upstreamBaseUrl: string,
  account: string,
  username: string,
): string {
  return `${keyPrefix}cache:${shortHash(`${upstreamBaseUrl}\naccount:${account}\nuser:${username}`)}:`;
}

/**
 * One read's answer under planCachePrefix: the operation, the version of its answer schemas (when the catalogue gives
 * one) and the exact upstream path (with its query).
 */
export function answerKey(operation: string, upstreamPath: string, answerVersion?: string): string {
  return answerVersion ? `${operation}@${answerVersion}:${upstreamPath}` : `${operation}:${upstreamPath}`;
}

/** Counters of the per-client rate limit, one set per window length. */
export function rateLimitPrefix(keyPrefix: string, windowSeconds: number): string {
  return `${keyPrefix}rl:${windowSeconds}:`;
}

/** Counters of one browser-session user inside their web app's limit, one set per window length. */
export function userRateLimitPrefix(keyPrefix: string, windowSeconds: number): string {
  return `${keyPrefix}rl-user:${windowSeconds}:`;
}

/** Counters of failed authentications per client IP, one set per window length. */
export function authFailurePrefix(keyPrefix: string, windowSeconds: number): string {
  return `${keyPrefix}authfail:${windowSeconds}:`;
}

/** One account's provider budget (SPEC §11): the fleet record and its signal channel share one hash tag. */
export interface BudgetKeys {
  /** Hash: each replica's demand and allocation, the learned rate, the pause and its probe. */
  readonly fleet: string;
  /** Pause, resume and lowered-rate signals, so replicas learn them before their next exchange. */
  readonly channel: string;
}

/** Per account id (lower-case letters, digits, dashes): two accounts never share a budget. */
export function budgetKeys(keyPrefix: string, accountId: string): BudgetKeys {
  const base = `${keyPrefix}{budget:${accountId}}`;
  return { fleet: `${base}:fleet`, channel: `${base}:signals` };
}

/**
 * Quota counters of one client and provider account, one per period (`day`/`month`, the timezone and the period's id
 * there: `2026-11-25` in Tokyo and in Sao Paulo are different days, never one count). One hash tag per client and
 * account: the day and month claim is one script on one Cluster slot.
 */
export function quotaCounterKey(
  keyPrefix: string,
  clientId: string,
  accountId: string,
  period: string,
  periodId: string,
  timeZone: string,
): string {
  return `${keyPrefix}{quota:${clientId}:${accountId}}:${period}:${timeZone}:${periodId}`;
}

/** The replicas that claimed units of one client and account lately (field: replica id, value: ms of its claim). */
export function quotaReplicasKey(keyPrefix: string, clientId: string, accountId: string): string {
  return `${keyPrefix}{quota:${clientId}:${accountId}}:replicas`;
}

/** Set once (SET NX) by the replica that logs a quota threshold first: one warning for the fleet. */
export function quotaWarningKey(
  keyPrefix: string,
  clientId: string,
  accountId: string,
  period: string,
  periodId: string,
  timeZone: string,
  percent: number,
): string {
  return `${keyPrefix}{quota:${clientId}:${accountId}}:warned:${period}:${timeZone}:${periodId}:${percent}`;
}

/** The ledger store's marker (no expiry): since when it holds the ledger, and when a replica found it reset. */
export function usageStoreMarkerKey(keyPrefix: string): string {
  return `${keyPrefix}usage:store`;
}

/** The usage ledger of one UTC day: a hash with one field per replica start (its whole count of the day). */
export function usageDayKey(keyPrefix: string, day: string): string {
  return `${keyPrefix}usage:${day}`;
}

/**
 * One Idempotency-Key's record (SPEC §13): its claim, then the answer kept. Scoped by client, provider account and
 * operation; the caller's key is hashed with them, so no caller-chosen text reaches a key name.
 */
export function idempotencyRecordKey(
  keyPrefix: string,
  clientId: string,
  accountId: string,
  operation: string,
  idempotencyKey: string,
): string {
  return `${keyPrefix}idem:${sha256Base64Url(`${clientId}\n${accountId}\n${operation}\n${idempotencyKey}`)}`;
}

/** Browser sessions: names hold a session's handle (the SHA-256 of its id), never the id; one hash tag a session. */
export interface SessionKeys {
  presence(handle: string): string;
  grant(handle: string): string;
  lock(handle: string): string;
  /** The sessions of one provider session (back-channel logout by sid). */
  bySid(sid: string): string;
  /** The sessions of one user (back-channel logout by sub). */
  bySub(sub: string): string;
  /** A pending login, named by its state's binding. */
  login(binding: string): string;
  /** A back-channel logout token already used, named by the hash of its issuer and jti. */
  usedLogoutToken(issuer: string, jti: string): string;
}

export function sessionKeys(keyPrefix: string): SessionKeys {
  return {
    presence: (handle) => `${keyPrefix}session:{${handle}}`,
    grant: (handle) => `${keyPrefix}session:{${handle}}:grant`,
    lock: (handle) => `${keyPrefix}session:{${handle}}:lock`,
    bySid: (sid) => `${keyPrefix}session-sid:${sha256Base64Url(sid)}`,
    bySub: (sub) => `${keyPrefix}session-sub:${sha256Base64Url(sub)}`,
    login: (binding) => `${keyPrefix}session-login:${binding}`,
    usedLogoutToken: (issuer, jti) =>
      `${keyPrefix}session-logout-jti:${sha256Base64Url(`${issuer}\n${jti}`)}`,
  };
}

/** 16 hex digits: short enough for a key, long enough that two upstreams or usernames never meet. */
function shortHash(value: string): string {
  return sha256Hex(value).slice(0, 16);
}
