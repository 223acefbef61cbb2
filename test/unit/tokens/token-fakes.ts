// Fakes for token-manager unit tests: a fake clock, a fake token endpoint and quiet observability.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { GatewayError } from '../../../src/http/gateway-error';
import { deriveKey } from '../../../src/keys/derived-keys';
import { createMetrics, type Metrics } from '../../../src/observability/metrics';
import { createMemoryTokenStore } from '../../../src/store/memory-token-store';
import type { Clock, ClockTimer } from '../../../src/tokens/internal/clock';
import type {
  CredentialSource,
  Credentials,
  CredentialsListener,
} from '../../../src/tokens/internal/credentials';
import { credentialsOf } from '../../../src/tokens/internal/credentials';
import { createRecordSeal, type RecordSeal } from '../../../src/tokens/internal/record-seal';
import { createTokenCipher } from '../../../src/tokens/internal/token-cipher';
import type {
  TokenClient,
  TokenResponse,
  UpstreamCredentials,
} from '../../../src/tokens/internal/token-client';
import { createTokenManager, type TokenManagerSettings } from '../../../src/tokens/internal/token-manager';
import type { TokenProvider } from '../../../src/tokens/internal/token-provider';
import type { StoreHealthReport, TokenStore } from '../../../src/tokens/internal/token-store';

/** Lets every pending promise chain run (real macrotask turns; nothing here uses real timers otherwise). */
export async function settle(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}

interface FakeTimer extends ClockTimer {
  at: number;
  seq: number;
  run: () => void;
}

export class FakeClock implements Clock {
  private timers = new Set<FakeTimer>();
  private seq = 0;
  constructor(private current = 1_700_000_000_000) {}
  now = () => this.current;
  setTimeout = (run: () => void, ms: number): ClockTimer => {
    const timer: FakeTimer = {
      at: this.current + Math.max(0, ms),
      seq: this.seq++,
      run,
      unref: () => undefined,
    };
    this.timers.add(timer);
    return timer;
  };
  clearTimeout = (timer: ClockTimer): void => {
    this.timers.delete(timer as FakeTimer);
  };
  pending(): number {
    return this.timers.size;
  }
  /** Moves time forward, firing due timers in order and letting promises settle after each. */
  async advance(ms: number): Promise<void> {
    const end = this.current + ms;
    await settle();
    for (;;) {
      const next = [...this.timers]
        .filter((t) => t.at <= end)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.timers.delete(next);
      this.current = Math.max(this.current, next.at);
      next.run();
      await settle();
    }
    this.current = end;
    await settle();
  }
}

const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** An unsigned JWT-shaped token; `exp` omitted when `expSeconds` is undefined. */
export function fakeJwt(claims: Record<string, unknown>): string {
  return `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}.c2lnbmF0dXJl`;
}

export interface FakeClientOptions {
  accessTtlSeconds?: number;
  refreshTtlSeconds?: number;
  rotateRefresh?: boolean;
  /** Issue tokens without an `exp` claim. */
  noExp?: boolean;
  username?: string;
  password?: string;
}

/** The token endpoints, on the fake clock: counts calls, can refuse, hold or fail them. */
export class FakeTokenClient implements TokenClient {
  logins = 0;
  refreshes = 0;
  loginFailures = 0;
  refreshFailures = 0;
  usedRefreshTokens: string[] = [];
  loginUsers: string[] = [];
  /** Make every call wait until release() (to hold a flight open). */
  held?: Promise<void>;
  private releaseHeld?: () => void;
  /** A failure every call gets until cleared. */
  failWith?: GatewayError;
  private valid = new Set<string>();
  private serial = 0;

  constructor(
    private readonly clock: FakeClock,
    readonly options: FakeClientOptions = {},
  ) {}

  hold(): void {
    this.held = new Promise((resolve) => {
      this.releaseHeld = resolve;
    });
  }
  release(): void {
    this.releaseHeld?.();
    this.held = undefined;
  }
  /** Revokes every refresh token issued so far (the upstream's revocation). */
  revokeRefreshTokens(): void {
    this.valid.clear();
  }

  private token(type: 'access' | 'refresh', ttl: number): string {
    const iat = Math.floor(this.clock.now() / 1000);
    const claims: Record<string, unknown> = { token_type: type, iat, jti: `${type}-${++this.serial}` };
    if (!this.options.noExp) claims.exp = iat + ttl;
    return fakeJwt(claims);
  }

  async login(credentials: UpstreamCredentials): Promise<TokenResponse> {
    this.loginUsers.push(credentials.username);
    if (this.held) await this.held;
    const expected = {
      username: this.options.username ?? 'merchant',
      password: this.options.password ?? 'secret',
    };
    if (this.failWith) {
      this.loginFailures++;
      throw this.failWith;
    }
    if (credentials.username !== expected.username || credentials.password !== expected.password) {
      this.loginFailures++;
      throw new GatewayError('UPSTREAM_AUTH_FAILED', 'refused');
    }
    this.logins++;
    const refresh = this.token('refresh', this.options.refreshTtlSeconds ?? 86_400);
    this.valid.add(refresh);
    return { access: this.token('access', this.options.accessTtlSeconds ?? 300), refresh };
  }

  async refresh(refreshToken: string): Promise<TokenResponse> {
    this.usedRefreshTokens.push(refreshToken);
    if (this.held) await this.held;
    if (this.failWith) {
      this.refreshFailures++;
      throw this.failWith;
    }
    if (!this.valid.has(refreshToken)) {
      this.refreshFailures++;
      throw new GatewayError('UPSTREAM_AUTH_FAILED', 'refresh refused');
    }
    this.refreshes++;
    const access = this.token('access', this.options.accessTtlSeconds ?? 300);
    if (!this.options.rotateRefresh) return { access };
    this.valid.delete(refreshToken);
    const refresh = this.token('refresh', this.options.refreshTtlSeconds ?? 86_400);
    this.valid.add(refresh);
    return { access, refresh };
  }
}

/** One fingerprint key for every fake replica of this process, as the fleet derives it from its shared encryption key. */
export const FINGERPRINT_KEY = deriveKey(randomBytes(32), 'credential-fingerprint');

/** Credentials a test can change, as a rotated secret mount would. */
export class FakeCredentialSource implements CredentialSource {
  private listeners = new Set<CredentialsListener>();
  private value: Credentials;
  constructor(username = 'merchant', password = 'secret') {
    this.value = credentialsOf(username, password, FINGERPRINT_KEY);
  }
  private changed = 0;
  current = () => this.value;
  changes = () => this.changed;
  async reload() {
    return false;
  }
  change(username: string, password: string): void {
    this.value = credentialsOf(username, password, FINGERPRINT_KEY);
    this.changed += 1;
    for (const listener of this.listeners) listener(this.value);
  }
  onChange(listener: CredentialsListener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  close() {
    this.listeners.clear();
  }
}

/** A logger whose lines the test can read (to prove nothing secret is logged). */
export function captureLogger(): { logger: Logger; lines: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      text += chunk.toString();
      callback();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines: () => text };
}

export function testMetrics() {
  return createMetrics();
}

/** The record seal the gateway builds: AES-256-GCM with `encryptionKey` when given, counting what does not open. */
export function testSeal(metrics: Pick<Metrics, 'storeRecordsRejected'>, encryptionKey?: Buffer): RecordSeal {
  return createRecordSeal(createTokenCipher(encryptionKey), metrics.storeRecordsRejected);
}

export const TEST_BASE_URL = 'https://api.example.test';

/** The token manager settings the unit tests start from (the production defaults of the lifecycle). */
export const TEST_SETTINGS: TokenManagerSettings = {
  upstreamBaseUrl: TEST_BASE_URL,
  refreshSkewSeconds: 60,
  lockTtlMs: 15_000,
  lockWaitMs: 5_000,
  loginMinIntervalMs: 20_000,
  loginMaxIntervalMs: 900_000,
  keyPrefix: 'bff:',
};

/** A store whose every call fails, like Redis when it is down. */
export function brokenStore(): TokenStore {
  const fail = async () => {
    throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
  };
  return {
    kind: 'redis',
    get: fail,
    set: fail,
    delete: fail,
    compareAndDelete: fail,
    acquireLock: fail,
    releaseLock: fail,
    publish: fail,
    subscribe: () => () => undefined,
    healthy: () => false,
    close: async () => undefined,
  };
}

/** Every token manager a fake fleet started: `afterEach(stopManagers)` stops them between tests. */
const started: TokenProvider[] = [];

export async function stopManagers(): Promise<void> {
  for (const manager of started.splice(0)) await manager.stop();
}

export interface FakeFleetOptions {
  readonly client?: FakeClientOptions;
  readonly settings?: Partial<TokenManagerSettings>;
  /** The jitter draw of every replica not given its own. Default 0.5. */
  readonly random?: () => number;
  /** TOKEN_ENCRYPTION_KEY of the fleet's record seal. */
  readonly encryptionKey?: Buffer;
  /** Makes each replica's store; by default the whole fleet shares one memory store. */
  readonly store?: () => TokenStore;
}

export interface ReplicaOptions {
  readonly settings?: Partial<TokenManagerSettings>;
  readonly store?: TokenStore;
  readonly random?: () => number;
  /** Where the replica reports its store calls (the gateway hands in the Redis-health owner). */
  readonly storeHealth?: StoreHealthReport;
  /** The replica's own credential source (a rollout: some replicas read a new password before the others). */
  readonly credentials?: FakeCredentialSource;
}

/** Token managers on one fake clock, token endpoint and credential source: replicas of a fleet, minus Redis. */
export function fakeFleet(options: FakeFleetOptions = {}) {
  const clock = new FakeClock();
  const client = new FakeTokenClient(clock, options.client);
  const store = createMemoryTokenStore({ now: clock.now });
  const credentials = new FakeCredentialSource();
  const { logger, lines } = captureLogger();
  const metrics = testMetrics();
  const seal = testSeal(metrics, options.encryptionKey);
  const managers: TokenProvider[] = [];
  const replica = (own: ReplicaOptions = {}): TokenProvider => {
    const manager = createTokenManager({
      store: own.store ?? options.store?.() ?? store,
      client,
      credentials: own.credentials ?? credentials,
      clock,
      logger,
      metrics,
      seal,
      settings: { ...TEST_SETTINGS, ...options.settings, ...own.settings },
      random: own.random ?? options.random ?? (() => 0.5),
      storeHealth: own.storeHealth,
    });
    managers.push(manager);
    started.push(manager);
    return manager;
  };
  /** Calls of the token endpoint so far, logins and refreshes. */
  const calls = () => client.logins + client.refreshes;
  return { clock, client, store, credentials, managers, log: lines, metrics, replica, calls };
}
