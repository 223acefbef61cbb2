// Server-side browser sessions: sealed records under an opaque random id, idle (sliding) and absolute expiry.
import { z } from 'zod';
import { sha256Base64Url } from '../keys/hash';
import { sessionKeys } from '../keys/redis-keys';
import type { Clock, RecordSeal, TokenStore } from '../tokens';
import { randomValue, schemaParser } from './random-values';
import type { SessionIndex } from './session-index';

/** What the gateway keeps about a signed-in user; never sent to the browser as such. */
export interface SessionRecord {
  readonly sub: string;
  /** The provider's session id (back-channel logout names it). */
  readonly sid?: string;
  readonly name?: string;
  readonly email?: string;
  /** Values of the web app's scope claim (e.g. groups) at the last login or revalidation. */
  readonly claimValues: readonly string[];
  readonly createdAt: number;
  readonly lastSeenAt: number;
  readonly revalidatedAt: number;
  readonly refreshToken?: string;
  readonly idToken?: string;
}

/** The part every request may write (the idle clock). */
const presenceSchema = z.strictObject({
  /** The provider and web app it was made for (SessionStoreDeps.owner). */
  owner: z.string().min(1),
  sub: z.string().min(1),
  sid: z.string().min(1).optional(),
  createdAt: z.number(),
  lastSeenAt: z.number(),
});

/**
 * The part only the holder of the session's lock writes (login and revalidation): kept under a key of its own, so
 * a request moving the idle clock on another replica can never write back a refresh token that was just spent.
 */
const grantSchema = z.strictObject({
  name: z.string().optional(),
  email: z.string().optional(),
  claimValues: z.array(z.string()),
  revalidatedAt: z.number(),
  refreshToken: z.string().optional(),
  idToken: z.string().optional(),
});

type Presence = z.infer<typeof presenceSchema>;
const parsePresence = schemaParser(presenceSchema);
const parseGrant = schemaParser(grantSchema);
export type SessionGrant = z.infer<typeof grantSchema>;

export interface SessionTimeouts {
  /** Sliding: a session unused this long ends (SESSION_IDLE_TIMEOUT_SECONDS). */
  readonly idleMs: number;
  /** Absolute: no session outlives this from its login (SESSION_MAX_LIFETIME_SECONDS). */
  readonly absoluteMs: number;
}

export interface SessionStoreDeps {
  readonly store: TokenStore;
  readonly index: SessionIndex;
  readonly seal: RecordSeal;
  readonly clock: Pick<Clock, 'now'>;
  readonly timeouts: SessionTimeouts;
  /** REDIS_KEY_PREFIX. */
  readonly keyPrefix: string;
  /**
   * The provider and web app sessions are made for (SESSION_ISSUER, SESSION_CLIENT_ID): a session of another one
   * sharing this Redis, prefix and key (or made before the operator changed them) does not open here.
   */
  readonly owner: string;
}

export interface OpenSession {
  readonly id: string;
  readonly record: SessionRecord;
}

export interface SessionStore {
  /** Stores a new session under a fresh random id (never one the browser proposed). */
  create(record: Omit<SessionRecord, 'createdAt' | 'lastSeenAt' | 'revalidatedAt'>): Promise<OpenSession>;
  /** The live session, its idle clock moved on; undefined when unknown, expired, tampered or malformed. */
  open(id: string): Promise<OpenSession | undefined>;
  /** The stored record as is (no touch), for revalidation under its lock. */
  peek(id: string): Promise<SessionRecord | undefined>;
  /** Replaces what the provider granted (revalidation, under the session's lock); false when the session ended. */
  replaceGrant(id: string, grant: SessionGrant): Promise<boolean>;
  destroy(id: string): Promise<void>;
  /** Ends every session of this provider session or user; how many were found. */
  destroyMatching(match: { readonly sid?: string; readonly sub?: string }): Promise<number>;
  /** Key of the fleet lock guarding this session's refresh token. */
  lockKey(id: string): string;
  /** When the session ends unless used again (idle timeout), or at the latest (absolute lifetime), epoch ms. */
  endOf(record: Pick<SessionRecord, 'createdAt' | 'lastSeenAt'>): number;
}

/** Session ids: 32 random bytes, base64url (43 characters). */
export const SESSION_ID_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export const newSessionId = randomValue;

/** The idle clock is written back at most this often: a busy session costs one read per request, not a write. */
const TOUCH_EVERY_MS = 30_000;

/**
 * Redis keys name the SHA-256 of the id, never the id itself, so a dump of Redis holds no usable cookie; the
 * record is sealed with the key name as associated data, so a record copied under another session's key does not
 * open. One hash tag per session keeps its record and its lock in one Cluster slot.
 */
export function createSessionStore(deps: SessionStoreDeps): SessionStore {
  const { index, clock, timeouts, keyPrefix, owner } = deps;
  const keys = sessionKeys(keyPrefix);
  const records = sessionRecords(deps);
  const handleOf = (id: string) => (SESSION_ID_PATTERN.test(id) ? sha256Base64Url(id) : undefined);

  return {
    async create(fields) {
      const now = clock.now();
      const record: SessionRecord = { ...fields, createdAt: now, lastSeenAt: now, revalidatedAt: now };
      const id = newSessionId();
      const handle = sha256Base64Url(id);
      const { sub, sid, createdAt, lastSeenAt, ...grant } = record;
      await records.writeGrant(handle, grant, record);
      await records.writePresence(handle, { owner, sub, sid, createdAt, lastSeenAt });
      if (sid) await index.add(keys.bySid(sid), handle, timeouts.absoluteMs);
      await index.add(keys.bySub(sub), handle, timeouts.absoluteMs);
      return { id, record };
    },
    async open(id) {
      const handle = handleOf(id);
      if (!handle) return undefined;
      const record = await records.read(handle);
      if (!record) return undefined;
      const now = clock.now();
      if (!records.live(record)) {
        await records.remove(handle, record);
        return undefined;
      }
      if (now - record.lastSeenAt < TOUCH_EVERY_MS) return { id, record };
      const touched = { ...record, lastSeenAt: now };
      const { sub, sid, createdAt } = touched;
      await records.writePresence(handle, { owner, sub, sid, createdAt, lastSeenAt: now });
      return { id, record: touched };
    },
    async peek(id) {
      const handle = handleOf(id);
      const record = handle ? await records.read(handle) : undefined;
      return records.live(record) ? record : undefined;
    },
    async replaceGrant(id, grant) {
      const handle = handleOf(id);
      const record = handle ? await records.read(handle) : undefined;
      if (!handle || !records.live(record)) return false;
      await records.writeGrant(handle, grantSchema.parse(grant), record);
      return true;
    },
    async destroy(id) {
      const handle = handleOf(id);
      if (handle) await records.remove(handle, await records.readPresence(handle));
    },
    destroyMatching: (match) => destroyMatching(deps, records, match),
    lockKey: (id) => keys.lock(sha256Base64Url(id)),
    endOf: records.endOf,
  };
}

type Times = Pick<Presence, 'createdAt' | 'lastSeenAt'>;

/** A session's two sealed parts under its handle, each kept in Redis until it could no longer open. */
interface SessionRecords {
  /** The presence under the handle, whoever owns it. */
  anyPresence(handle: string): Promise<Presence | undefined>;
  /** The presence of this owner's session (another owner's reads as absent). */
  readPresence(handle: string): Promise<Presence | undefined>;
  read(handle: string): Promise<SessionRecord | undefined>;
  writePresence(handle: string, presence: Presence): Promise<void>;
  writeGrant(
    handle: string,
    grant: Omit<SessionRecord, 'sub' | 'sid' | 'createdAt' | 'lastSeenAt'>,
    times: Times,
  ): Promise<void>;
  remove(handle: string, record?: Pick<Presence, 'sub' | 'sid'>): Promise<void>;
  endOf(times: Times): number;
  /** Whether the record is there and neither idle nor past its lifetime. */
  live(record: SessionRecord | undefined): record is SessionRecord;
}

function sessionRecords(deps: SessionStoreDeps): SessionRecords {
  const { store, index, seal, clock, timeouts, keyPrefix, owner } = deps;
  const keys = sessionKeys(keyPrefix);
  const endOf = (presence: Times) =>
    Math.min(presence.lastSeenAt + timeouts.idleMs, presence.createdAt + timeouts.absoluteMs);
  const lifetimeEnd = (presence: Times) => presence.createdAt + timeouts.absoluteMs;

  const readSealed = async <T>(key: string, parse: (text: string) => T | undefined) => {
    const raw = await store.get(key);
    return raw === undefined ? undefined : seal.open('session', raw, key, parse);
  };
  const writeSealed = async (key: string, value: object, until: number) => {
    const ttl = until - clock.now();
    if (ttl > 0) await store.set(key, seal.seal(JSON.stringify(value), key), ttl);
  };
  const anyPresence = (handle: string) => readSealed(keys.presence(handle), parsePresence);
  const readPresence = async (handle: string) => {
    const presence = await anyPresence(handle);
    return presence?.owner === owner ? presence : undefined;
  };
  return {
    endOf,
    anyPresence,
    readPresence,
    async read(handle) {
      // Both parts in one round trip: a request costs one wait on Redis, not two.
      const [presence, rawGrant] = await Promise.all([readPresence(handle), store.get(keys.grant(handle))]);
      if (!presence || rawGrant === undefined) return undefined;
      const grant = seal.open('session', rawGrant, keys.grant(handle), parseGrant);
      if (!grant) return undefined;
      const { owner: _, ...fields } = presence;
      return { ...grant, ...fields };
    },
    writePresence: (handle, presence) => writeSealed(keys.presence(handle), presence, endOf(presence)),
    writeGrant: (handle, grant, times) => writeSealed(keys.grant(handle), grant, lifetimeEnd(times)),
    async remove(handle, record) {
      await store.delete(keys.presence(handle), keys.grant(handle));
      if (record?.sid) await index.remove(keys.bySid(record.sid), handle);
      if (record) await index.remove(keys.bySub(record.sub), handle);
    },
    live: (record): record is SessionRecord => record !== undefined && endOf(record) > clock.now(),
  };
}

/** Ends every session of this provider session (sid) or user (sub) that this owner made; how many were found. */
async function destroyMatching(
  deps: SessionStoreDeps,
  records: SessionRecords,
  { sid, sub }: { readonly sid?: string; readonly sub?: string },
): Promise<number> {
  const { index, keyPrefix, owner } = deps;
  const keys = sessionKeys(keyPrefix);
  const handles = new Set<string>();
  if (sid) for (const handle of await index.members(keys.bySid(sid))) handles.add(handle);
  if (sub && !sid) for (const handle of await index.members(keys.bySub(sub))) handles.add(handle);
  let ended = 0;
  for (const handle of handles) {
    const presence = await records.anyPresence(handle);
    // Another provider's or web app's session sharing this Redis: its logout tokens end it, not ours.
    if (presence && presence.owner !== owner) continue;
    // With both, only sessions of that user in that provider session end (the spec's sid+sub pairing).
    if (presence && sub && presence.sub !== sub) continue;
    if (presence) ended++;
    await records.remove(handle, presence);
    if (sid) await index.remove(keys.bySid(sid), handle);
    if (sub) await index.remove(keys.bySub(sub), handle);
  }
  return ended;
}
