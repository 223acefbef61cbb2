// The token lifecycle's public surface: the rest of the gateway imports tokens from here, never from internal/.
export { type Clock, systemClock } from './internal/clock';
export {
  type CredentialSource,
  createCredentialSource,
  staticCredentialSource,
} from './internal/credentials';
export {
  createFleetBackoffView,
  type FleetBackoffState,
  type FleetBackoffView,
} from './internal/fleet-backoff-view';
export { ACCESS_FALLBACK_SECONDS, tokenExpiresAt } from './internal/jwt-expiry';
export type { BackoffRecord, RefusalReason } from './internal/login-backoff';
export { createRecordSeal, type RecordSeal } from './internal/record-seal';
export { SlowStoreGate } from './internal/slow-store-gate';
export { createTokenCipher } from './internal/token-cipher';
export { createTokenClient, LOGIN_PATH, refusalOfStatus } from './internal/token-client';
export { createTokenManager } from './internal/token-manager';
export type { TokenProvider, TokenSource } from './internal/token-provider';
export type { ChannelListener, TokenStore } from './internal/token-store';
