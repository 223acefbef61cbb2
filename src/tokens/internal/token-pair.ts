// The upstream token pair and which pair a flight, or a replica, should take.
import type { AccessToken, TokenSource } from './token-provider';

/** The pair as memory and the store hold it (sealed in the store when a key is configured). */
export interface TokenPair {
  readonly access: string;
  readonly refresh: string;
  readonly accessExpiresAt: number;
  readonly refreshExpiresAt: number;
  /** Fingerprint of the credentials that obtained it: pairs of older credentials are ignored. */
  readonly credentials: string;
}

/** What a flight is for: a caller without a usable token, the proactive refresh, or a token the upstream refused. */
export type FlightKind = 'need' | 'refresh' | 'renew';

/** What a flight started with, to judge the pairs it finds. */
export interface FlightContext {
  readonly kind: FlightKind;
  /** Fingerprint of the credentials the flight was started for. */
  readonly credentials: string;
  /** The pair in memory when the flight started. */
  readonly trigger?: TokenPair;
  /** The access token the upstream refused. */
  readonly rejected?: string;
}

/** A pair that ends the flight without a token endpoint call. */
export function endsFlight(
  flight: FlightContext,
  pair: TokenPair | undefined,
  now: () => number,
  marginMs: number,
): pair is TokenPair {
  if (!pair || pair.credentials !== flight.credentials || pair.access === flight.rejected) return false;
  if (now() >= pair.accessExpiresAt - marginMs) return false;
  // A refresh is satisfied by any pair newer than the one that fell due (another replica's refresh).
  const trigger = flight.trigger;
  if (flight.kind === 'refresh' && trigger)
    return pair.access !== trigger.access && pair.accessExpiresAt >= trigger.accessExpiresAt;
  return true;
}

/** Another replica's pair replaces ours when it is of our credentials, newer, and still handed out. */
export function replaces(
  pair: TokenPair | undefined,
  current: TokenPair | undefined,
  credentials: string,
  now: number,
  marginMs: number,
): pair is TokenPair {
  return (
    pair !== undefined &&
    pair.credentials === credentials &&
    pair.access !== current?.access &&
    pair.accessExpiresAt >= (current?.accessExpiresAt ?? 0) &&
    now < pair.accessExpiresAt - marginMs
  );
}

/** The pair with the later access expiry among those of the given credentials. */
export function newest(
  a: TokenPair | undefined,
  b: TokenPair | undefined,
  credentials: string,
): TokenPair | undefined {
  const usable = (p?: TokenPair) => (p?.credentials === credentials ? p : undefined);
  const [x, y] = [usable(a), usable(b)];
  if (!x) return y;
  if (!y) return x;
  return y.accessExpiresAt >= x.accessExpiresAt ? y : x;
}

export function tokenOf(pair: TokenPair, source: TokenSource): AccessToken {
  return { value: pair.access, expiresAt: pair.accessExpiresAt, source };
}
